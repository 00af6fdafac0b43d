// Package heal restores progress after a lock's counter went backwards.
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
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

// DefaultAttempts is how many times Write heals and retries by default.
const DefaultAttempts = 3

// Option configures Write.
type Option func(*config)

type config struct{ attempts int }

// WithAttempts sets how many times Write heals and retries after the first
// rejected write. The default is DefaultAttempts; n below 0 counts as 0.
func WithAttempts(n int) Option {
	return func(c *config) { c.attempts = max(n, 0) }
}

// Write calls write with l's token. If write returns an error for which
// errors.As finds a *verifier.StaleError, and l still holds its lock,
// Write reissues l's token above the storage's highest Seq
// (lease.Lease.Reissue) and calls write again with it.
//
// write must be one guarded write (check and write in one atomic step, such
// as a pgverifier transaction), so a rejected attempt changed nothing.
// Write returns nil, write's last error, or that error joined with the
// reason it could not heal (the lease is lost: errors.Is(err, lease.ErrLost)).
func Write(ctx context.Context, l *lease.Lease, write func(ctx context.Context, tok fence.Token) error, opts ...Option) error {
	cfg := config{attempts: DefaultAttempts}
	for _, o := range opts {
		o(&cfg)
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
