// Package heal restores progress after a lock's counter went backwards.
//
//	err := heal.Write(ctx, l, func(ctx context.Context, tok fence.Token) error {
//		return v.WithTx(ctx, "accounts/7", tok, func(tx pgx.Tx) error { return debit(ctx, tx) })
//	})
//
// Redis replication is asynchronous, and a Redis without persistence
// forgets its keys on restart, so a lease's counter can go backwards: after
// a failover to a lagging replica, a restart, or an eviction, new tokens
// repeat Seqs the storage has already accepted. The verifier rejects them
// (that is what keeps the data safe), but every holder would then be
// rejected until the counter caught up. [Write] closes that gap without an
// operator: when a guarded write is rejected as stale while the lease still
// holds the lock in Redis, the rejection was caused by the counter, not by
// another holder; Write lifts the counter past the storage's highest Seq,
// gives the lease a new token and retries the write, a bounded number of
// times. When the lease no longer holds the lock, the rejection is deserved
// and Write returns it.
package heal

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

// DefaultAttempts is how many times Write heals and retries by default.
const DefaultAttempts = 3

// ErrInvalid is returned, before any call, for a nil lease (a typed nil
// too), a nil write function, a nil context or a bad option. It wraps
// lease.ErrInvalid.
var ErrInvalid error = sentinel.New("heal: invalid argument", lease.ErrInvalid)

// Option configures Write. Options check their arguments; Write returns the
// first error, which wraps ErrInvalid.
type Option func(*config) error

type config struct{ attempts int }

// WithAttempts sets how many times Write heals and retries after the first
// rejected write: n must be 0 or more. The default is DefaultAttempts.
func WithAttempts(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: %d attempts", ErrInvalid, n)
		}
		c.attempts = n
		return nil
	}
}

// Write calls write with l's token. If write returns an error for which
// errors.As finds a *verifier.StaleError, and l still holds its lock,
// Write reissues l's token above the storage's highest Seq (l.Reissue) and
// calls write again with it. l is a lease of either kind (on a quorum,
// with quorum fencing, Reissue lifts the counters of a majority).
//
// write must be one guarded write (check and write in one atomic step, such
// as a pgverifier transaction), so a rejected attempt changed nothing.
// Write returns nil, write's last error, or that error joined with the
// reason it could not heal (the lease is lost: errors.Is(err, lease.ErrLost)).
func Write(ctx context.Context, l *lease.Lease, write func(ctx context.Context, tok fence.Token) error, opts ...Option) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalid)
	case l == nil:
		return fmt.Errorf("%w: nil lease", ErrInvalid)
	case write == nil:
		return fmt.Errorf("%w: nil write function", ErrInvalid)
	}
	cfg := config{attempts: DefaultAttempts}
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: option #%d is nil", ErrInvalid, i)
		}
		if err := o(&cfg); err != nil {
			return err
		}
	}
	for i := 0; ; i++ {
		err := write(ctx, l.Token())
		var stale *verifier.StaleError
		if !errors.As(err, &stale) {
			return err
		}
		if i >= cfg.attempts {
			return fmt.Errorf("heal: still stale after %d attempts: %w", cfg.attempts, err)
		}
		if _, herr := l.Reissue(ctx, stale.Highest); herr != nil {
			return errors.Join(err, herr)
		}
	}
}
