package checkrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/safety"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// Client phases, for the nemesis to pick a holder to pause or delay.
const (
	idle       int32 = iota
	beforeStep       // holds a lock, has not reached the point where a pause lands
	writing          // holds a lock, past that point
)

// client is one of the N clients of a kind: its own Redis connections
// (lock), its own Postgres connection (through its own proxy, which the
// delay-write fault slows down), and a verifier on that connection.
type client struct {
	id     int
	fenced bool
	lock   *safety.LockClient
	db     *pgxpool.Pool
	ver    *pgverifier.Verifier
	proxy  *faults.Proxy // nil when Postgres is not reached over TCP
	rec    *check.Recorder
	groups []group
	rng    *rand.Rand
	think  [2]time.Duration
	wait   time.Duration // how long an acquire may wait
	opTime time.Duration // bound on an operation's Postgres work

	n      int // acquisitions
	phase  atomic.Int32
	pause  atomic.Int64 // a pending pause (ns), served at the next pause point
	paused atomic.Int64 // pauses served
	noLock atomic.Int64 // acquisitions that failed (no op is recorded)
	lastNo atomic.Pointer[string]
}

func (c *client) close() {
	c.lock.Close()
	c.db.Close()
	if c.proxy != nil {
		c.proxy.Close()
	}
}

var errLost = errors.New("lock lost before the write (the holder's own check)")

// run does operations until stop ends: mostly lock-guarded cycles, and one
// unguarded register read in eight. Operations already under way finish
// (bounded by opTime) after stop.
func (c *client) run(ctx, stop context.Context) {
	for stop.Err() == nil {
		if c.rng.IntN(8) == 0 {
			c.read(ctx)
			continue
		}
		c.cycle(ctx, stop)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (c *client) thinkTime() time.Duration {
	return c.think[0] + rand.N(c.think[1]-c.think[0]+1)
}

// read reads a register without the lock (a linearizable storage needs
// none): it constrains the linearizability check.
func (c *client) read(ctx context.Context) {
	r := c.groups[c.rng.IntN(len(c.groups))].reg
	h := c.rec.Invoke(check.Op{Client: c.id, Kind: check.KindRead, Resource: r.name})
	octx, cancel := context.WithTimeout(ctx, c.opTime)
	defer cancel()
	var v int64
	if err := c.db.QueryRow(octx, readRegisterSQL, r.name).Scan(&v); err != nil {
		h.Fail(err) // a read changes nothing: never unknown
	} else {
		h.OkRead(false, v)
	}
	sleep(ctx, c.thinkTime())
}

// cycle takes the lock of a random group and, under it, appends a unique
// element to the group's set, then increments its register (each a
// read-modify-write). No op is recorded when the lock was not acquired.
func (c *client) cycle(ctx, stop context.Context) {
	g := c.groups[c.rng.IntN(len(c.groups))]
	actx, cancel := context.WithTimeout(stop, c.wait)
	hold, err := c.lock.Acquire(actx, g.lock)
	cancel()
	if err != nil {
		if stop.Err() == nil {
			c.noLock.Add(1)
			msg := err.Error()
			c.lastNo.Store(&msg)
			sleep(stop, 10*time.Millisecond)
		}
		return
	}
	c.n++
	// One holder id per acquisition; for unfenced kinds the token is the
	// lock name and that id with Seq 0 (the checkers order holders by
	// their first write).
	holder := fmt.Sprintf("c%d.%d", c.id, c.n)
	lease := c.recordLease(hold, g.lock, holder)
	c.phase.Store(beforeStep)
	defer c.phase.Store(idle)
	tok := check.Token{Key: g.lock, Holder: holder}
	if c.fenced {
		if t, ok := hold.Token(); ok {
			tok = check.TokenOf(t)
		}
	}
	op := check.Op{Client: c.id, Holder: holder, Token: tok}
	octx, cancelOp := context.WithTimeout(ctx, c.opTime)
	if c.step(octx, hold, g.set, op, int64(c.id)*1_000_000+int64(c.n)) {
		c.step(octx, hold, g.reg, op, 0)
	}
	cancelOp()
	rctx, cancelRel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	lease.Released()
	hold.Release(rctx) // errors expected: the lock is often gone by now
	cancelRel()
}

// recordLease records the acquisition that just returned: its window for
// the exclusion checker (the lock's token and its lease's local deadline,
// for fencelock's kinds), and an acquisition after a waiter left, for the
// liveness checker.
func (c *client) recordLease(hold locks.Hold, lock, holder string) *check.LeaseHandle {
	l := check.Lease{Client: c.id, Lock: lock, Holder: holder, Held: hold.Held()}
	if t, ok := hold.Token(); ok {
		l.Token = check.TokenOf(t)
	}
	var deadline time.Time
	if leased, ok := hold.(locks.Leased); ok {
		deadline = leased.Lease().Deadline()
	}
	return c.rec.Acquired(l, deadline)
}

// step records and runs one read-modify-write of r under hold: an append
// of elem to a set, or an increment of a register. It reports whether the
// write was acknowledged.
func (c *client) step(ctx context.Context, hold locks.Hold, r resource, op check.Op, elem int64) bool {
	op.Resource, op.Kind = r.name, check.KindIncr
	if r.set {
		op.Kind, op.Value = check.KindAppend, elem
	}
	h := c.rec.Invoke(op)
	var out check.Outcome
	if c.fenced {
		out = c.fencedStep(ctx, hold, r, h, elem)
	} else {
		out = c.plainStep(ctx, hold, r, h, elem)
	}
	return out == check.Ok
}

// pausePoint is where a paused holder stops: right before the increment's
// write (unfenced) or its transaction (fenced). It serves a pending pause.
func (c *client) pausePoint(ctx context.Context, r resource) {
	if r.set {
		return
	}
	if d := time.Duration(c.pause.Swap(0)); d > 0 {
		c.paused.Add(1)
		sleep(ctx, d)
	}
	c.phase.Store(writing)
}

// plainStep is the unfenced read-modify-write: read, think, check the lock
// (Held), [pause point], write in one statement.
func (c *client) plainStep(ctx context.Context, hold locks.Hold, r resource, h *check.Handle, elem int64) check.Outcome {
	var v int64
	var items []int64
	var err error
	if r.set {
		err = c.db.QueryRow(ctx, readSetSQL, r.name).Scan(&items)
	} else {
		err = c.db.QueryRow(ctx, readRegisterSQL, r.name).Scan(&v)
	}
	if err != nil {
		h.Fail(err)
		return check.Fail
	}
	sleep(ctx, c.thinkTime())
	if !hold.Held() {
		h.Fail(errLost)
		return check.Fail
	}
	c.pausePoint(ctx, r)
	var commit int64
	if r.set {
		err = c.db.QueryRow(ctx, writeSetSQL, r.name, append(slices.Clip(items), elem)).Scan(&commit)
	} else {
		h.Writing(v + 1)
		err = c.db.QueryRow(ctx, writeRegisterSQL, r.name, v+1).Scan(&commit)
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		h.Ok(uint64(commit))
		return check.Ok
	case errors.As(err, &pgErr):
		h.Fail(err) // the server refused it: not applied
		return check.Fail
	}
	h.Unknown(err) // sent, no reply: it may have committed
	return check.Unknown
}

// fencedStep is the fenced read-modify-write: check the lock (Held),
// [pause point], then in one transaction the verifier's guard first (claim
// before read), read, think, write; heal.Write reissues the token and
// retries when the counter went backwards.
func (c *client) fencedStep(ctx context.Context, hold locks.Hold, r resource, h *check.Handle, elem int64) check.Outcome {
	leased, ok := hold.(locks.Leased)
	if !ok {
		h.Fail(fmt.Errorf("%T has no lease", hold))
		return check.Fail
	}
	if !hold.Held() {
		h.Fail(errLost)
		return check.Fail
	}
	c.pausePoint(ctx, r)
	var commit int64
	wrote := false // the write statement ran; the commit's outcome decides
	err := heal.Write(ctx, leased.Lease(), func(ctx context.Context, tok fence.Token) error {
		h.SetToken(check.TokenOf(tok))
		wrote = false
		return c.ver.WithTx(ctx, r.name, tok, func(tx pgx.Tx) error {
			var v int64
			var items []int64
			var err error
			if r.set {
				err = tx.QueryRow(ctx, readSetSQL, r.name).Scan(&items)
			} else {
				err = tx.QueryRow(ctx, readRegisterSQL, r.name).Scan(&v)
			}
			if err != nil {
				return err
			}
			sleep(ctx, c.thinkTime())
			if r.set {
				err = tx.QueryRow(ctx, writeSetSQL, r.name, append(slices.Clip(items), elem)).Scan(&commit)
			} else {
				h.Writing(v + 1)
				err = tx.QueryRow(ctx, writeRegisterSQL, r.name, v+1).Scan(&commit)
			}
			wrote = err == nil
			return err
		})
	})
	var stale *verifier.StaleError
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		h.Ok(uint64(commit))
		return check.Ok
	case errors.As(err, &stale):
		h.Reject(err)
		return check.Fail
	case wrote && !errors.As(err, &pgErr):
		h.Unknown(err) // the commit was sent and its reply lost
		return check.Unknown
	}
	h.Fail(err) // the transaction did not commit
	return check.Fail
}
