package safety

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// The protected data: one row per cell holding a set of ids (a text
// array), and a log of every committed write with the row version it made
// (the commit order: the UPDATE holds the row lock until commit) and the
// epoch of the acquisition that made it.
const safetySchema = `
CREATE TABLE IF NOT EXISTS fencelock_safety_data (
	resource text PRIMARY KEY,
	items    text[] NOT NULL DEFAULT '{}',
	version  bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS fencelock_safety_applied (
	resource text   NOT NULL,
	version  bigint NOT NULL,
	epoch    bigint NOT NULL,
	item     text   NOT NULL,
	PRIMARY KEY (resource, version)
);
CREATE SEQUENCE IF NOT EXISTS fencelock_safety_epoch;
`

// writeSQL is the write of the read-modify-write: it stores the set the
// worker computed from its earlier read (the database does not append), bumps
// the version and logs the write, in one statement.
const writeSQL = `WITH u AS (
	UPDATE fencelock_safety_data SET items = $2, version = version + 1
	WHERE resource = $1 RETURNING resource, version)
INSERT INTO fencelock_safety_applied (resource, version, epoch, item)
SELECT resource, version, $3, $4 FROM u`

// prepareDB creates the tables and the verifier's table.
func prepareDB(ctx context.Context, db *pgxpool.Pool) error {
	if _, err := migrations.Apply(ctx, db); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := db.Exec(ctx, safetySchema); err != nil {
		return fmt.Errorf("safety schema: %w", err)
	}
	return nil
}

// newResource adds an empty data row for one cell.
func newResource(ctx context.Context, db *pgxpool.Pool, resource string) error {
	_, err := db.Exec(ctx, `INSERT INTO fencelock_safety_data (resource) VALUES ($1)
		ON CONFLICT (resource) DO UPDATE SET items = '{}', version = 0`, resource)
	if err == nil {
		_, err = db.Exec(ctx, `DELETE FROM fencelock_safety_applied WHERE resource = $1`, resource)
	}
	return err
}

// dropResources deletes the rows of a run (for a database the user gave).
func dropResources(ctx context.Context, db *pgxpool.Pool, prefix string) {
	db.Exec(ctx, `DELETE FROM fencelock_safety_data WHERE resource LIKE $1`, prefix+"%")
	db.Exec(ctx, `DELETE FROM fencelock_safety_applied WHERE resource LIKE $1`, prefix+"%")
	db.Exec(ctx, `DELETE FROM `+pgverifier.DefaultTable+` WHERE resource LIKE $1`, prefix+"%")
}

// tally is the checker's verdict on one resource.
type tally struct {
	ops, acked, rejected, failed int
	lost, stale, overlaps        int
}

// checkResource compares the final data with every committed write and
// counts overlaps among cycles.
func checkResource(ctx context.Context, db *pgxpool.Pool, resource string, cycles []report.Cycle) (tally, error) {
	var t tally
	for _, c := range cycles {
		switch c.Outcome {
		case report.NoLock:
			t.failed++
			continue
		case report.Acked:
			t.acked++
		case report.Rejected:
			t.rejected++
		default:
			t.failed++
		}
		t.ops++
	}
	for i := range cycles {
		for j := i + 1; j < len(cycles); j++ {
			a, b := cycles[i], cycles[j]
			if a.Outcome != report.NoLock && b.Outcome != report.NoLock && a.Start < b.End && b.Start < a.End {
				t.overlaps++
			}
		}
	}

	var final []string
	if err := db.QueryRow(ctx, `SELECT items FROM fencelock_safety_data WHERE resource = $1`, resource).Scan(&final); err != nil {
		return t, fmt.Errorf("reading the final data: %w", err)
	}
	have := map[string]bool{}
	for _, it := range final {
		have[it] = true
	}
	rows, err := db.Query(ctx, `SELECT epoch, item FROM fencelock_safety_applied WHERE resource = $1 ORDER BY version`, resource)
	if err != nil {
		return t, err
	}
	type applied struct {
		epoch int64
		item  string
	}
	log, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (applied, error) {
		var a applied
		return a, r.Scan(&a.epoch, &a.item)
	})
	if err != nil {
		return t, err
	}
	var high int64
	for _, a := range log {
		if !have[a.item] {
			t.lost++
		}
		if a.epoch < high {
			t.stale++
		}
		high = max(high, a.epoch)
	}
	// Every acknowledged write is in the log (same statement); a write the
	// log has but no worker acknowledged would be a checker bug.
	acked := map[string]bool{}
	for _, c := range cycles {
		if c.Outcome == report.Acked {
			acked[c.Item] = true
		}
	}
	for _, a := range log {
		if !acked[a.item] {
			return t, fmt.Errorf("checker: write of %s committed but not acknowledged", a.item)
		}
	}
	if len(log) != len(acked) {
		return t, fmt.Errorf("checker: %d writes acknowledged, %d committed", len(acked), len(log))
	}
	return t, nil
}
