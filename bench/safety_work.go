package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier"
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

// prepareSafetyDB creates the tables and the verifier's table.
func prepareSafetyDB(ctx context.Context, db *pgxpool.Pool) error {
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

// Outcomes of one cycle.
const (
	outAcked    = "acked"    // the write committed
	outRejected = "rejected" // the verifier refused the token
	outAborted  = "aborted"  // the holder saw its lock was gone before writing
	outFailed   = "failed"   // anything else after the lock was taken
	outNoLock   = "nolock"   // the lock was not acquired in time
)

// cycle is what one read-modify-write cycle did, as its worker saw it.
type cycle struct {
	Worker  string `json:"worker"`
	Epoch   int64  `json:"epoch"`
	Item    string `json:"item"`
	Outcome string `json:"outcome"`
	Err     string `json:"err,omitempty"`
	// Start and End bound the time the worker acted as the holder: from
	// the acquire's return to the write's (or the abort's) return, in Unix
	// nanoseconds of this machine's clock, shared by every process.
	Start int64 `json:"start_ns"`
	End   int64 `json:"end_ns"`
	// Stalled is how long the worker was held up before its write, in
	// nanoseconds (0 when it was not).
	Stalled int64 `json:"stalled_ns,omitempty"`
	// Healed: the verifier refused the first token (the counter had gone
	// backwards), heal.Write reissued it and the write landed.
	Healed bool `json:"healed,omitempty"`
}

// worker runs cycles of one lock kind on one resource, over its own Redis
// and Postgres connections.
type worker struct {
	id       string
	kind     *safetyLock
	db       *pgxpool.Pool // the data path: reads, claims and writes
	epochs   *pgxpool.Pool // takes the epoch: never delayed by a fault
	ver      *pgverifier.Verifier
	resource string
	wait     time.Duration // how long an acquire may wait
	n        int
	called   atomic.Int64 // Unix ns when the last cycle called acquire
}

func newWorker(id string, kind *safetyLock, db, epochs *pgxpool.Pool, resource string) (*worker, error) {
	ver, err := pgverifier.New(db)
	if err != nil {
		return nil, err
	}
	return &worker{id: id, kind: kind, db: db, epochs: epochs, ver: ver, resource: resource, wait: 6 * kind.ttl}, nil
}

var errLostBeforeWrite = errors.New("lock lost before the write (the holder's own check)")

// run does one cycle. beforeWrite, when set, is called once, after the
// read and the holder's own validity check, right before the write: the
// point where a scenario stalls the holder.
//
// by, when not zero, is the latest time the acquire may return by.
func (w *worker) run(ctx context.Context, by time.Time, beforeWrite func(hold)) cycle {
	w.n++
	c := cycle{Worker: w.id, Item: fmt.Sprintf("%s-%d", w.id, w.n)}
	if by.IsZero() {
		by = time.Now().Add(w.wait)
	}
	w.called.Store(time.Now().UnixNano())
	actx, cancel := context.WithDeadline(ctx, by)
	h, err := w.kind.acquire(actx, w.resource)
	cancel()
	if err != nil {
		c.Outcome, c.Err = outNoLock, err.Error()
		return c
	}
	c.Start = time.Now().UnixNano()
	if err := w.epochs.QueryRow(ctx, `SELECT nextval('fencelock_safety_epoch')`).Scan(&c.Epoch); err != nil {
		c.Outcome, c.Err, c.End = outFailed, err.Error(), time.Now().UnixNano()
		h.release(context.WithoutCancel(ctx))
		return c
	}
	var once sync.Once
	stall := func() {
		if beforeWrite != nil {
			once.Do(func() {
				t := time.Now()
				beforeWrite(h)
				c.Stalled = int64(time.Since(t))
			})
		}
	}
	err = w.rmw(ctx, h, &c, stall)
	c.End = time.Now().UnixNano()
	var stale *verifier.StaleError
	switch {
	case err == nil:
		c.Outcome = outAcked
	case errors.As(err, &stale):
		c.Outcome, c.Err = outRejected, err.Error()
	case errors.Is(err, errLostBeforeWrite):
		c.Outcome, c.Err = outAborted, err.Error()
	default:
		c.Outcome, c.Err = outFailed, err.Error()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	h.release(rctx) // errors are expected: the lock is often gone by now
	cancel()
	return c
}

// rmw reads the set, adds the item and writes the set back, the way the
// kind does it.
func (w *worker) rmw(ctx context.Context, h hold, c *cycle, stall func()) error {
	read := func() ([]string, error) {
		var items []string
		err := w.db.QueryRow(ctx, `SELECT items FROM fencelock_safety_data WHERE resource = $1`, w.resource).Scan(&items)
		return items, err
	}
	check := func() error {
		if !h.held() {
			return errLostBeforeWrite
		}
		return nil
	}
	// rmwOnce reads, checks, is held up, and writes the new set with write.
	rmwOnce := func(write func(set []string) error) error {
		items, err := read()
		if err != nil {
			return err
		}
		if err := check(); err != nil {
			return err
		}
		stall()
		return write(add(items, c.Item))
	}
	// fenced is one attempt of the fenced cycle with token tok.
	fenced := func(ctx context.Context, tok fence.Token, claim bool) error {
		if claim {
			if err := w.ver.Claim(ctx, w.resource, tok); err != nil {
				return err
			}
		}
		return rmwOnce(func(set []string) error {
			_, err := w.ver.Exec(ctx, w.resource, tok, writeSQL, w.resource, set, c.Epoch, c.Item)
			return err
		})
	}
	switch w.kind.name {
	case kindLeaseVerifier, kindRedlockVerifier:
		attempts := 0
		err := heal.Write(ctx, h.(leaseHold).l, func(ctx context.Context, tok fence.Token) error {
			attempts++
			return fenced(ctx, tok, true)
		})
		c.Healed = attempts > 1 && err == nil
		return err
	case kindWriteOnly:
		tok, _ := h.token()
		return fenced(ctx, tok, false)
	}
	return rmwOnce(func(set []string) error {
		tag, err := w.db.Exec(ctx, writeSQL, w.resource, set, c.Epoch, c.Item)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("write changed %d rows", tag.RowsAffected())
		}
		return err
	})
}

func add(items []string, item string) []string {
	return append(slices.Clip(items), item)
}

// tally is the checker's verdict on one resource.
type tally struct {
	ops, acked, rejected, failed int
	lost, stale, overlaps        int
}

// checkResource compares the final data with every committed write and
// counts overlaps among cycles.
func checkResource(ctx context.Context, db *pgxpool.Pool, resource string, cycles []cycle) (tally, error) {
	var t tally
	for _, c := range cycles {
		switch c.Outcome {
		case outNoLock:
			t.failed++
			continue
		case outAcked:
			t.acked++
		case outRejected:
			t.rejected++
		default:
			t.failed++
		}
		t.ops++
	}
	for i := range cycles {
		for j := i + 1; j < len(cycles); j++ {
			a, b := cycles[i], cycles[j]
			if a.Outcome != outNoLock && b.Outcome != outNoLock && a.Start < b.End && b.Start < a.End {
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
		if c.Outcome == outAcked {
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
