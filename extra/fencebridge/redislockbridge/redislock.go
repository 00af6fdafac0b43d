// Package redislockbridge is the old lock of a fleet that used
// bsm/redislock, for a fencebridge.Bridge.
//
//	old := redislockbridge.New(redislock.New(rdb), 30*time.Second, nil)
//	bridge, err := fencebridge.New(old, locks)
//
// It is a module of its own, so that a redislock user's build gets no
// other peer library.
package redislockbridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"

	"github.com/fencelock/fencelock/extra/fencebridge"
)

// New is the old lock as bsm/redislock takes it: c.Obtain with ttl and the
// options opt returns, retried as opt's RetryStrategy says (nil opt: one
// try, redislock's default), and without a ctx deadline for at most ttl,
// as redislock does. opt is called for each acquire, because redislock's
// retry strategies count their tries (a LimitRetry shared by two acquires
// would be spent). The retries run here, one Obtain per try, so that the
// lock's validity counts from the try that took it: that try's start plus
// ttl (redislock has no drift allowance, and none is added). A refresh
// extends it by ttl.
func New(c *redislock.Client, ttl time.Duration, opt func() *redislock.Options) fencebridge.Old {
	return old{c: c, ttl: ttl, opt: opt}
}

type old struct {
	c   *redislock.Client
	ttl time.Duration
	opt func() *redislock.Options
}

func (o old) Lock(ctx context.Context, name string) (fencebridge.OldLock, error) {
	if o.c == nil {
		return nil, fmt.Errorf("%w: nil *redislock.Client", fencebridge.ErrInvalid)
	}
	if o.ttl <= 0 {
		return nil, fmt.Errorf("%w: redislock ttl %v, want > 0", fencebridge.ErrInvalid, o.ttl)
	}
	var try redislock.Options
	if o.opt != nil {
		if opt := o.opt(); opt != nil {
			try = *opt
		}
	}
	retry := try.RetryStrategy
	if retry == nil {
		retry = redislock.NoRetry()
	}
	try.RetryStrategy = redislock.NoRetry()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.ttl)
		defer cancel()
	}
	for {
		start := time.Now()
		l, err := o.c.Obtain(ctx, name, o.ttl, &try)
		if err == nil {
			return &lock{l: l, ttl: o.ttl, until: start.Add(o.ttl)}, nil
		}
		backoff := retry.NextBackoff()
		if !errors.Is(err, redislock.ErrNotObtained) || backoff < 1 {
			return nil, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

// lock is a held redislock lock; the Bridge serialises its Refresh and
// Unlock, while Until may be read at any time.
type lock struct {
	l   *redislock.Lock
	ttl time.Duration

	mu    sync.Mutex
	until time.Time
}

func (l *lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *lock) Refresh(ctx context.Context) error {
	start := time.Now()
	err := l.l.Refresh(ctx, l.ttl, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return fmt.Errorf("%w: %w", fencebridge.ErrOldNotHeld, err)
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.until = start.Add(l.ttl)
	l.mu.Unlock()
	return nil
}

func (l *lock) Unlock(ctx context.Context) error {
	err := l.l.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return fmt.Errorf("%w: %w", fencebridge.ErrOldNotHeld, err)
	}
	return err
}
