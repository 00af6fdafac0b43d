package safety

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// worker runs cycles of one lock kind on one resource, over its own Redis
// and Postgres connections.
type worker struct {
	id       string
	kind     *client
	db       *pgxpool.Pool // the data path: reads, claims and writes
	epochs   *pgxpool.Pool // takes the epoch: never delayed by a fault
	ver      *pgverifier.Verifier
	resource string
	wait     time.Duration // how long an acquire may wait
	n        int
	called   atomic.Int64 // Unix ns when the last cycle called acquire
}

func newWorker(id string, kind *client, db, epochs *pgxpool.Pool, resource string) (*worker, error) {
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
func (w *worker) run(ctx context.Context, by time.Time, beforeWrite func(locks.Hold)) report.Cycle {
	w.n++
	c := report.Cycle{Worker: w.id, Item: fmt.Sprintf("%s-%d", w.id, w.n)}
	if by.IsZero() {
		by = time.Now().Add(w.wait)
	}
	w.called.Store(time.Now().UnixNano())
	actx, cancel := context.WithDeadline(ctx, by)
	h, err := w.kind.acquire(actx, w.resource)
	cancel()
	if err != nil {
		c.Outcome, c.Err = report.NoLock, err.Error()
		return c
	}
	c.Start = time.Now().UnixNano()
	if err := w.epochs.QueryRow(ctx, `SELECT nextval('fencelock_safety_epoch')`).Scan(&c.Epoch); err != nil {
		c.Outcome, c.Err, c.End = report.Failed, err.Error(), time.Now().UnixNano()
		h.Release(context.WithoutCancel(ctx))
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
		c.Outcome = report.Acked
	case errors.As(err, &stale):
		c.Outcome, c.Err = report.Rejected, err.Error()
	case errors.Is(err, errLostBeforeWrite):
		c.Outcome, c.Err = report.Aborted, err.Error()
	default:
		c.Outcome, c.Err = report.Failed, err.Error()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	h.Release(rctx) // errors are expected: the lock is often gone by now
	cancel()
	return c
}

// rmw reads the set, adds the item and writes the set back, the way the
// kind does it.
func (w *worker) rmw(ctx context.Context, h locks.Hold, c *report.Cycle, stall func()) error {
	read := func() ([]string, error) {
		var items []string
		err := w.db.QueryRow(ctx, `SELECT items FROM fencelock_safety_data WHERE resource = $1`, w.resource).Scan(&items)
		return items, err
	}
	check := func() error {
		if !h.Held() {
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
	switch w.kind.write {
	case claimFirst:
		leased, ok := h.(locks.Leased)
		if !ok {
			return fmt.Errorf("%s: the lock has no lease to heal", w.kind.Name)
		}
		attempts := 0
		err := heal.Write(ctx, leased.Lease(), func(ctx context.Context, tok fence.Token) error {
			attempts++
			return fenced(ctx, tok, true)
		})
		c.Healed = attempts > 1 && err == nil
		return err
	case atWrite:
		tok, ok := h.Token()
		if !ok {
			return fmt.Errorf("%s: the lock has no token", w.kind.Name)
		}
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
