package fencebridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
)

// ErrOldNotHeld is returned (wrapped) by an OldLock's Unlock when the old
// lock had already expired or passed to another holder.
var ErrOldNotHeld = errors.New("fencebridge: the old lock was not held")

// Redsync is the old lock as go-redsync/redsync takes it: a Mutex of rs
// with opts, locked with LockContext (so redsync's tries, retry delay and
// expiry apply, 32 tries and 8s by default). Use the pools and options of
// the old fleet.
func Redsync(rs *redsync.Redsync, opts ...redsync.Option) Old {
	return redsyncOld{rs: rs, opts: opts}
}

type redsyncOld struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func (o redsyncOld) Lock(ctx context.Context, name string) (OldLock, error) {
	if o.rs == nil {
		return nil, fmt.Errorf("%w: nil *redsync.Redsync", ErrInvalid)
	}
	m := o.rs.NewMutex(name, o.opts...)
	if err := m.LockContext(ctx); err != nil {
		// redsync reports an ended context as ErrFailed alone.
		return nil, oneLine{errors.Join(err, ctx.Err())}
	}
	return redsyncLock{m}, nil
}

type redsyncLock struct{ m *redsync.Mutex }

// Until is redsync's own validity: expiry minus the time the lock took
// and the drift allowance.
func (l redsyncLock) Until() time.Time { return l.m.Until() }

func (l redsyncLock) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	var io *redsync.RedisError
	switch {
	case ok:
		return nil
	case err == nil:
		return fmt.Errorf("%w (redsync)", ErrOldNotHeld)
	case errors.As(err, &io):
		return fmt.Errorf("fencebridge: redsync unlock: %w", oneLine{err})
	}
	return fmt.Errorf("%w: %w", ErrOldNotHeld, oneLine{err})
}

// Redislock is the old lock as bsm/redislock takes it: c.Obtain with ttl
// and the options opt returns, retried as opt's RetryStrategy says (nil
// opt: one try, redislock's default), and without a ctx deadline for at
// most ttl, as redislock does. opt is called for each acquire, because
// redislock's retry strategies count their tries (a LimitRetry shared by
// two acquires would be spent). The retries run here, one Obtain per try,
// so that the lock's validity counts from the try that took it: that try's
// start plus ttl (redislock has no drift allowance, and none is added).
func Redislock(c *redislock.Client, ttl time.Duration, opt func() *redislock.Options) Old {
	return redislockOld{c: c, ttl: ttl, opt: opt}
}

type redislockOld struct {
	c   *redislock.Client
	ttl time.Duration
	opt func() *redislock.Options
}

func (o redislockOld) Lock(ctx context.Context, name string) (OldLock, error) {
	if o.c == nil {
		return nil, fmt.Errorf("%w: nil *redislock.Client", ErrInvalid)
	}
	if o.ttl <= 0 {
		return nil, fmt.Errorf("%w: redislock ttl %v, want > 0", ErrInvalid, o.ttl)
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
			return redislockLock{l: l, until: start.Add(o.ttl)}, nil
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

type redislockLock struct {
	l     *redislock.Lock
	until time.Time
}

func (l redislockLock) Until() time.Time { return l.until }

func (l redislockLock) Unlock(ctx context.Context) error {
	err := l.l.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return fmt.Errorf("%w: %w", ErrOldNotHeld, err)
	}
	return err
}
