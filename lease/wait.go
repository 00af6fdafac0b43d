package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/lifetime"
)

// Acquire takes lock name for ttl, waiting while another holder has it.
//
// The first try costs one round trip. If the lock is held, Acquire
// subscribes to the lock's release channel and tries again whenever a
// release is published, when the holder's remaining ttl runs out (a lock
// that expires without a release), or after a jittered exponential backoff
// (see WithBackoff), whichever comes first.
//
// When ctx ends first the error wraps both ErrNotAcquired and ctx.Err().
// An I/O error from Redis is returned at once rather than retried, so a
// waiter never hangs on a server that is gone.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return c.observed(ctx, name, ttl, true, func(ctx context.Context, p *emit.Progress) (*Lease, error) {
		req, err := c.newRequest(name, ttl, opts)
		if err != nil {
			return nil, err
		}
		return c.wait(ctx, req, p)
	})
}

// wait is Acquire once the request is valid.
func (c *Client) wait(ctx context.Context, req request, p *emit.Progress) (*Lease, error) {
	name := req.name
	p.Attempts++
	l, res, err := c.try(ctx, req)
	if l != nil || err != nil {
		return l, err
	}

	sub := c.rdb.Subscribe(ctx, req.keys.Channel)
	defer sub.Close()
	// Wait for the subscription to be confirmed, so that a release published
	// from now on reaches us; then try again to catch one that came before.
	if _, err := sub.Receive(ctx); err != nil {
		return nil, c.waitErr(ctx, req, fmt.Errorf("lease: subscribe %q: %w", name, err))
	}
	wake := sub.Channel()

	backoff := c.cfg.minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		p.Attempts++
		l, res, err = c.try(ctx, req)
		if l != nil || err != nil {
			return l, err
		}
		p.Handoff = false
		wait := jitter(backoff)
		if res.PTTL > 0 && res.PTTL+time.Millisecond < wait {
			wait = res.PTTL + time.Millisecond
		}
		backoff = min(2*backoff, c.cfg.maxBackoff)

		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, notAcquired(ctx, name, nil)
		case <-wake:
			backoff = c.cfg.minBackoff
			p.Handoff = true
		case <-timer.C:
		}
		if !timer.Stop() {
			select { // drain, for timers of Go before 1.23 semantics
			case <-timer.C:
			default:
			}
		}
	}
}

// waitErr keeps ctx.Err(), ErrNotAcquired and the cause in the chain when
// the context ended, and returns err as is otherwise.
func (c *Client) waitErr(ctx context.Context, req request, err error) error {
	if lifetime.Ended(ctx) != nil {
		return notAcquired(ctx, req.name, err)
	}
	return err
}

// jitter returns a random duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}
