package fencebridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// oneLine is err with its message on one line: redsync joins its nodes'
// errors with errors.Join, one per line, which breaks a log line. The
// parts stay reachable with errors.Is and errors.As.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", "; ") }
func (e oneLine) Unwrap() error { return e.err }

// Redislock is the old lock as bsm/redislock takes it: c.Obtain with ttl
// and opt (opt's RetryStrategy applies; nil means one try, redislock's
// default). The lock is valid until the start of Obtain plus ttl:
// redislock has no drift allowance, and none is added here.
func Redislock(c *redislock.Client, ttl time.Duration, opt *redislock.Options) Old {
	return redislockOld{c: c, ttl: ttl, opt: opt}
}

type redislockOld struct {
	c   *redislock.Client
	ttl time.Duration
	opt *redislock.Options
}

func (o redislockOld) Lock(ctx context.Context, name string) (OldLock, error) {
	if o.c == nil {
		return nil, fmt.Errorf("%w: nil *redislock.Client", ErrInvalid)
	}
	if o.ttl <= 0 {
		return nil, fmt.Errorf("%w: redislock ttl %v, want > 0", ErrInvalid, o.ttl)
	}
	start := time.Now()
	l, err := o.c.Obtain(ctx, name, o.ttl, o.opt)
	if err != nil {
		return nil, err
	}
	return redislockLock{l: l, until: start.Add(o.ttl)}, nil
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
