package safety

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// round runs one faulted round: see scenario.
func (c *cell) round(ctx context.Context, round int) error {
	sc := c.sc
	if err := sc.fault.before(ctx, c); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer c.heal()
	a, err := c.startA(ctx, round)
	if err != nil {
		return err
	}
	// A's cycle ends the round's, after B's.
	defer func() { c.cycles = append(c.cycles, a.finish()) }()
	reached, aCalled, err := c.awaitA(ctx, a)
	if err != nil {
		return err
	}
	c.heal()
	if err := sc.fault.inject(ctx, c, a); err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	b := c.runB(ctx, a, aCalled)
	c.cycles = append(c.cycles, b)
	ac := a.finish()
	if err := sc.fault.after(ctx, c); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return staged(sc, c.ttl, reached, ac, b)
}

// awaitA waits until A is held up right before its write (reached) or has
// ended without getting there. aCalled is when A called acquire, when A
// runs in this process.
func (c *cell) awaitA(ctx context.Context, a *holderA) (reached bool, aCalled time.Time, err error) {
	select {
	case <-a.ready:
		if c.a != nil {
			aCalled = time.Unix(0, c.a.called.Load())
		}
		return true, aCalled, nil
	case cy := <-a.done:
		a.ended, a.cycle = true, cy // e.g. rejected at its claim
		return false, aCalled, nil
	case <-ctx.Done():
		return false, aCalled, ctx.Err()
	}
}

// runB runs B's cycle while A is held up.
func (c *cell) runB(ctx context.Context, a *holderA, aCalled time.Time) report.Cycle {
	if c.sc.order == handover {
		return c.handover(ctx, a)
	}
	// After a node fault B must get the lock before A's would have expired
	// by itself (A called acquire before the server set its TTL): only the
	// fault can have freed it. With A's keep-alive running, nothing but the
	// fault frees it at all.
	var by time.Time
	if c.sc.onNode() && c.sc.a != keepAlive && !aCalled.IsZero() {
		by = aCalled.Add(c.ttl)
	}
	return c.b.run(ctx, by, nil)
}

// handover runs B up to its write, lets A write, then lets B write.
func (c *cell) handover(ctx context.Context, a *holderA) report.Cycle {
	bReady, bGo := make(chan struct{}), make(chan struct{})
	bDone := make(chan report.Cycle, 1)
	go func() {
		bDone <- c.b.run(ctx, time.Time{}, func(locks.Hold) {
			close(bReady)
			<-bGo
		})
	}()
	select {
	case <-bReady:
		a.finish()
		close(bGo)
		return <-bDone
	case bc := <-bDone:
		return bc
	}
}

// staged checks that a round staged the race it was meant to: A reached
// its write, B got the lock (within its deadline), A was held up past the
// TTL where time alone frees the lock, and A's write came after B's
// (before it, in the handover). A round that did not is void: an error,
// never a clean cell.
func staged(sc scenario, ttl time.Duration, reached bool, a, b report.Cycle) error {
	if !reached {
		return fmt.Errorf("holder A did not reach its write (%s: %s): the round is void", a.Outcome, a.Err)
	}
	if b.Outcome == report.NoLock {
		return fmt.Errorf("holder B got no lock (%s): the fault did not free it; the round is void", b.Err)
	}
	if _, timeOnly := sc.fault.(expiry); timeOnly && a.Stalled < int64(ttl) {
		return fmt.Errorf("holder A was held up %v, less than the TTL %v: the round is void", time.Duration(a.Stalled), ttl)
	}
	first, second := b, a
	if sc.order == handover {
		first, second = a, b
	}
	if second.End < first.End {
		return fmt.Errorf("%s's write returned before %s's: the round is void", second.Worker, first.Worker)
	}
	return nil
}
