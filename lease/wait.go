package lease

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/script"
)

// Acquire takes lock name for ttl, waiting while another holder has it.
//
// The first try costs one round trip. If the lock is held, the waiter
// listens on the lock's release channel through the client's one shared
// pub/sub connection (see [Client]) and tries again when a release wakes it,
// when the holder's remaining ttl runs out (a lock that expires without a
// release), or after a jittered exponential backoff (see WithBackoff),
// whichever comes first. A release wakes one waiter, not all.
//
// A fair lock (the default, see [WithFair]) queues the waiter: a release
// hands the lock, with a new token, straight to the longest-waiting live
// waiter and tells it so in the release message, so the woken waiter
// returns without another round trip. Such a lease's local deadline counts
// from the sending of the waiter's last try, which the handoff followed;
// when that leaves less than half the ttl, one refresh renews it first. A
// waiter whose context ends leaves the queue, and if the lock was handed to
// it meanwhile, passes it on (a re-acquire under WithHolder only leaves the
// queue: the lock may be one its holder had before).
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
func (c *Client) wait(ctx context.Context, req request, p *emit.Progress) (l *Lease, err error) {
	req.args.Enqueue = req.args.Fair
	if req.args.Fair && ctx != nil {
		defer func() {
			if err != nil {
				c.leave(ctx, req)
			}
		}()
	}
	// On a lock this client's waiters already listen to, join them before
	// the first try (no I/O): a release after that try cannot be missed.
	// Otherwise the first try goes alone, so an uncontended Acquire costs
	// one round trip and no subscription; if it fails, subscribe, and try
	// again once the subscription is confirmed, to catch a release in
	// between.
	w := c.notify.Join(req.keys.Channel, req.args.Holder)
	listening := w != nil
	if listening {
		defer c.notify.Unregister(w)
	}

	p.Attempts++
	sent := time.Now() // a handoff comes after the last failed try was sent
	l, res, err := c.try(ctx, req)
	if l != nil || err != nil {
		if l != nil {
			w.Drain() // the release it announced was the one this try took
		}
		return l, err
	}
	if !listening {
		w = c.notify.Register(ctx, req.keys.Channel, req.args.Holder)
		defer c.notify.Unregister(w)
		w.WaitReady(ctx)
	}

	backoff := c.cfg.minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	for first := listening; ; first = false {
		if !first {
			p.Attempts++
			sent = time.Now()
			l, res, err = c.try(ctx, req)
			if l != nil || err != nil {
				if l != nil {
					w.Drain()
				}
				return l, err
			}
		}
		p.Handoff = false
		wait := jitter(backoff)
		if req.args.Fair {
			// Queued: the release hands the lock over and says so, so
			// there is nothing to poll for; the next try only renews the
			// ticket, or finds a handoff whose message was lost.
			wait = ticketTTL / 3
		}
		if res.PTTL > 0 && res.PTTL+time.Millisecond < wait {
			wait = res.PTTL + time.Millisecond // expires without a release
		}
		backoff = min(2*backoff, c.cfg.maxBackoff)

		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, notAcquired(ctx, req.name, nil)
		case u := <-w.Wake():
			backoff = c.cfg.minBackoff
			p.Handoff = true
			if l := c.handedOff(ctx, req, u, sent); l != nil {
				return l, nil
			}
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

// handedOff returns the lease a fair release handed to this waiter, or nil
// when u is not a handoff to it (or the lock is gone already).
//
// The lease counts its deadline from sent, when the waiter's last failed
// try was sent: the handoff, and with it the key's ttl, came after that try
// ran, so the deadline stays below Redis's expiry however late the message
// arrives. When that leaves less than half the ttl, one refresh, timed from
// before it is sent, gives the lease its full validity.
func (c *Client) handedOff(ctx context.Context, req request, u notify.Wakeup, sent time.Time) *Lease {
	holder, seq, ok := u.Handoff()
	if !ok || holder != req.args.Holder {
		return nil
	}
	n, err := fence.ParseSeq(seq)
	if err != nil || n == 0 {
		return nil // not ours to read: the next try finds out
	}
	tok := fence.Token{Key: req.name, Seq: n, Holder: holder}
	l := newLease(c, req, tok, sent)
	if time.Until(l.Deadline()) < req.ttl/2 {
		if err := l.Refresh(ctx, req.ttl); errors.Is(err, ErrLost) {
			return nil // the next try finds out what became of it
		}
	}
	return l
}

// leave takes a fair waiter that gives up out of the queue and, if the lock
// was handed to it meanwhile, passes the lock on: the release script does
// both. It runs in the background, bounded, when ctx has ended.
func (c *Client) leave(ctx context.Context, req request) {
	_ = lifetime.Detach(ctx, releaseTimeout, lifetime.CleanupBound(req.ttl), func(ctx context.Context) error {
		_, err := script.Leave(ctx, c.rdb, req.keys, req.args.Holder, req.args)
		return err
	})
}

// ticketTTL is how long a fair waiter's ticket lives without renewal. A
// waiter renews it with every try, at least every ticketTTL/3, so a waiter
// that died drops out of the queue within ticketTTL.
const ticketTTL = 2 * time.Second

// jitter returns a random duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}
