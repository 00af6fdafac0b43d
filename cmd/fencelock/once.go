//go:build unix

package main

import (
	"context"
	"errors"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
	"github.com/fencelock/fencelock/verifier"
)

// exitDone is run's status with --once-per when a run of NAME completed in
// this period already: the command did not run.
const exitDone = 6

// oncePer is run --once-per: the period's tracker, on the lock's Redis.
type oncePer struct {
	period  time.Duration
	tracker *once.Tracker
}

// newOncePer returns run's --once-per for backend b, or nil for period 0.
// It needs one Redis deployment: with Redlock, no single node may keep the
// record for the quorum.
func (g *globals) newOncePer(b backend, period time.Duration) (*oncePer, int) {
	if period == 0 {
		return nil, exitOK
	}
	s, code := g.oneRedis(b, "--once-per")
	if s == nil {
		return nil, code
	}
	t, err := once.New(s.rdb)
	if err != nil {
		return nil, g.fail(exitFailure, "run: %v", err)
	}
	return &oncePer{period: period, tracker: t}, exitOK
}

// claim claims the period for tok before the command starts, by at. It
// returns the claim, or nil and run's status: exitDone when the period is
// done.
func (o *oncePer) claim(g *globals, tok fence.Token, at time.Time) (*once.Claim, int) {
	ctx, cancel := context.WithDeadline(context.Background(), at)
	defer cancel()
	c, err := o.tracker.Claim(ctx, tok, o.period)
	switch {
	case errors.Is(err, once.ErrDone):
		return nil, g.fail(exitDone, "run: %v", err)
	case errors.Is(err, verifier.ErrStale): // a newer holder claimed: this lease is gone
		return nil, g.fail(exitLost, "run: %v", err)
	case err != nil:
		return nil, g.fail(exitFailure, "run: %v", err)
	}
	return c, exitOK
}

// complete records the command's success, by at, before the lease is
// released (so that the next holder sees the period done). It returns
// run's status: 4 when a newer holder has claimed the period since (the
// lease was lost), 1 when Redis did not record it.
func complete(g *globals, c *once.Claim, at time.Time) int {
	ctx, cancel := context.WithDeadline(context.Background(), at)
	defer cancel()
	err := c.Complete(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, verifier.ErrStale):
		return g.fail(exitLost, "run: the command succeeded, but %v: %v", lease.ErrLost, err)
	}
	return g.fail(exitFailure, "run: the command succeeded, but its period was not recorded: %v", err)
}
