// Package redsyncbridge is the old lock of a fleet that used
// go-redsync/redsync, for a fencebridge.Bridge.
//
//	old := redsyncbridge.New(redsync.New(goredis.NewPool(rdb)), redsync.WithExpiry(30*time.Second))
//	bridge, err := fencebridge.New(old, locks)
//
// It is a module of its own, so that a redsync user's build gets no other
// peer library.
package redsyncbridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/fencelock/fencelock/extra/fencebridge"
)

// New is the old lock as go-redsync/redsync takes it: a Mutex of rs with
// opts, locked with LockContext (so redsync's tries, retry delay and expiry
// apply, 32 tries and 8s by default) and extended with ExtendContext. Use
// the pools and options of the old fleet.
func New(rs *redsync.Redsync, opts ...redsync.Option) fencebridge.Old {
	return old{rs: rs, opts: opts}
}

type old struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func (o old) Lock(ctx context.Context, name string) (fencebridge.OldLock, error) {
	if o.rs == nil {
		return nil, fmt.Errorf("%w: nil *redsync.Redsync", fencebridge.ErrInvalid)
	}
	m := o.rs.NewMutex(name, o.opts...)
	if err := m.LockContext(ctx); err != nil {
		// redsync reports an ended context as ErrFailed alone.
		return nil, errors.Join(err, ctx.Err())
	}
	return &lock{m: m, until: m.Until()}, nil
}

// lock is a held redsync Mutex; the Bridge serialises its Refresh and
// Unlock, while Until may be read at any time (the Mutex's own Until may
// not, during an extension).
type lock struct {
	m *redsync.Mutex

	mu    sync.Mutex
	until time.Time
}

// Until is redsync's own validity: expiry minus the time the lock (or its
// last extension) took and the drift allowance.
func (l *lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *lock) Refresh(ctx context.Context) error {
	ok, err := l.m.ExtendContext(ctx)
	var io *redsync.RedisError
	switch {
	case ok:
		l.mu.Lock()
		l.until = l.m.Until()
		l.mu.Unlock()
		return nil
	case errors.As(err, &io):
		return fmt.Errorf("redsync extend: %w", err)
	case err == nil:
		return fmt.Errorf("%w (redsync)", fencebridge.ErrOldNotHeld)
	}
	return fmt.Errorf("%w: %w", fencebridge.ErrOldNotHeld, err)
}

func (l *lock) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	var io *redsync.RedisError
	switch {
	case ok:
		return nil
	case err == nil:
		return fmt.Errorf("%w (redsync)", fencebridge.ErrOldNotHeld)
	case errors.As(err, &io):
		return fmt.Errorf("redsync unlock: %w", err)
	}
	return fmt.Errorf("%w: %w", fencebridge.ErrOldNotHeld, err)
}
