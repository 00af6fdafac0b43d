package checkrun

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// The protected data: registers (an integer each) and sets (an array of
// elements each), one row per resource. Every write takes its commit number
// from one storage-wide sequence in its own statement, after the UPDATE has
// locked the row (and, for the fenced kinds, after the verifier's guard
// locked the high-water row in the same transaction): the row lock is held
// until commit, so per resource the numbers follow the commit order.
const schema = `
CREATE TABLE IF NOT EXISTS fencelock_check_registers (
	resource text PRIMARY KEY,
	value    bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS fencelock_check_sets (
	resource text PRIMARY KEY,
	items    bigint[] NOT NULL DEFAULT '{}'
);
CREATE SEQUENCE IF NOT EXISTS fencelock_check_commit;
`

const (
	readRegisterSQL  = `SELECT value FROM fencelock_check_registers WHERE resource = $1`
	writeRegisterSQL = `UPDATE fencelock_check_registers SET value = $2 WHERE resource = $1
		RETURNING nextval('fencelock_check_commit')`
	readSetSQL  = `SELECT items FROM fencelock_check_sets WHERE resource = $1`
	writeSetSQL = `UPDATE fencelock_check_sets SET items = $2 WHERE resource = $1
		RETURNING nextval('fencelock_check_commit')`
)

// resource is one protected row.
type resource struct {
	name string
	set  bool // a set (append workload); else a register (increment workload)
}

// group is the resources one lock guards: a set and a register. A cycle
// appends to the set, then increments the register, so a holder writes
// twice under one acquisition, and a holder whose lock was taken in between
// shows as writes interleaved with the next holder's (the fenced-mutex
// checker's stand-in for locks without tokens).
type group struct {
	lock     string
	set, reg resource
}

// groups is the lock groups of a kind: enough contention for 16 clients,
// few enough that each lock sees many handovers.
const groups = 2

// groupsFor names the groups of kind in run id.
func groupsFor(runID, kind string) []group {
	var out []group
	for i := range groups {
		name := fmt.Sprintf("check-%s-%s-%d", runID, kind, i)
		out = append(out, group{lock: name, set: resource{name: name + "-set", set: true}, reg: resource{name: name + "-reg"}})
	}
	return out
}

// resourcesOf lists the groups' resources.
func resourcesOf(gs []group) []resource {
	var out []resource
	for _, g := range gs {
		out = append(out, g.set, g.reg)
	}
	return out
}

func prepareDB(ctx context.Context, db *pgxpool.Pool) error {
	if _, err := migrations.Apply(ctx, db); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := db.Exec(ctx, schema); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	return nil
}

// newResources creates the rows, empty.
func newResources(ctx context.Context, db *pgxpool.Pool, rs []resource) error {
	for _, r := range rs {
		q := `INSERT INTO fencelock_check_registers (resource) VALUES ($1) ON CONFLICT (resource) DO UPDATE SET value = 0`
		if r.set {
			q = `INSERT INTO fencelock_check_sets (resource) VALUES ($1) ON CONFLICT (resource) DO UPDATE SET items = '{}'`
		}
		if _, err := db.Exec(ctx, q, r.name); err != nil {
			return err
		}
	}
	return nil
}

// readFinal reads the resources' final state.
func readFinal(ctx context.Context, db *pgxpool.Pool, rs []resource) (check.Final, error) {
	f := check.Final{Registers: map[string]int64{}, Sets: map[string][]int64{}}
	for _, r := range rs {
		if r.set {
			var items []int64
			if err := db.QueryRow(ctx, readSetSQL, r.name).Scan(&items); err != nil {
				return f, fmt.Errorf("final %s: %w", r.name, err)
			}
			f.Sets[r.name] = items
			continue
		}
		var v int64
		if err := db.QueryRow(ctx, readRegisterSQL, r.name).Scan(&v); err != nil {
			return f, fmt.Errorf("final %s: %w", r.name, err)
		}
		f.Registers[r.name] = v
	}
	return f, nil
}

// dropResources deletes a run's rows (for a database the user gave).
func dropResources(ctx context.Context, db *pgxpool.Pool, prefix string) {
	db.Exec(ctx, `DELETE FROM fencelock_check_registers WHERE resource LIKE $1`, prefix+"%")
	db.Exec(ctx, `DELETE FROM fencelock_check_sets WHERE resource LIKE $1`, prefix+"%")
	db.Exec(ctx, `DELETE FROM `+pgverifier.DefaultTable+` WHERE resource LIKE $1`, prefix+"%")
}

// clientPool opens a one-connection pool to dsn, through addr when it is
// not "" (a client's own proxy, which the delay-write fault slows down).
func clientPool(ctx context.Context, dsn, addr string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 1
	if addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		p, _ := strconv.Atoi(port)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
		cfg.ConnConfig.Fallbacks = nil
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}
