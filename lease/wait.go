package lease

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/observe"
)

// Acquire takes lock name for ttl, waiting while another holder has it.
//
// The first try costs one round trip. If the lock is held, the waiter
// listens on the lock's release channel through the client's one shared
// pub/sub connection (see [Client]) and tries again when a release wakes it,
// when the holder's remaining ttl runs out, or after a jittered exponential
// backoff (see [WithBackoff]), whichever comes first.
//
// A fair lock (the default, see [WithFair]) queues the waiter: a release
// hands the lock, with a new token, straight to the longest-waiting live
// waiter and names it, and the try it followed, in the release message, so
// the waiter returns without another round trip. The release hands the
// lock over for a claim window of 2s (the ttl if shorter), so that a
// waiter that died does not keep it for its ttl: the lease counts that
// window from the sending of that try, and extends it to the whole ttl
// with one refresh in the background before half of it is gone (none if
// the lease is released or refreshed first; an I/O error is retried until
// the window's end, and a lock found gone ends the lease). When less than
// half the window is left (a message read late), one refresh renews the
// lock first, and if the lock is gone by then the waiter waits on. A waiter whose context ends leaves the queue and, if
// the lock was handed to it meanwhile, passes it on (see [Client.Close] for
// a process that exits right after).
//
// When ctx ends first the error wraps both ErrNotAcquired and ctx.Err(),
// and a lock the last try took anyway is released in the background. An
// I/O error from Redis is returned at once rather than retried, so a
// waiter never hangs on a server that is gone.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return emit.Observed(c.hooks(), observe.KindLease, ctx, name, ttl, true, ErrNotAcquired, c.named(func(ctx context.Context, p *emit.Progress) (*Lease, error) {
		req, err := c.newRequest(ctx, name, ttl, opts)
		if err != nil {
			return nil, err
		}
		return c.wait(ctx, req, p)
	}))
}

// wait is Acquire once the request is valid.
func (c *Client) wait(ctx context.Context, req request, p *emit.Progress) (l *Lease, err error) {
	if req.try.Fair {
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
	w := c.notify.Join(req.keys.Channel, req.try.Holder)
	listening := w != nil
	if listening {
		defer c.notify.Unregister(w)
	}
	var tries recent
	try := func() (*Lease, protocol.TryResult, error) {
		for {
			p.Attempts++
			if req.try.Fair {
				req.try.Attempt = protocol.NewAttempt()
			}
			tries.add(req.try.Attempt, time.Now())
			l, res, err := c.try(ctx, req)
			if l != nil && !l.Held() {
				// The reply was read after the lease's deadline (this
				// process was paused with it in flight): the lease is
				// over before it is returned. If the lock is still ours,
				// the next try gets it back with a fresh deadline.
				continue
			}
			if l != nil {
				w.Drain() // the release it announced was the one this try took
			}
			return l, res, err
		}
	}

	l, res, err := try()
	if l != nil || err != nil {
		return l, err
	}
	if !listening {
		w = c.notify.Register(ctx, req.keys.Channel, req.try.Holder)
		defer c.notify.Unregister(w)
		w.WaitReady(ctx)
	}

	backoff, waits := c.cfg.Backoff(), 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for first := listening; ; first = false {
		if !first {
			if l, res, err = try(); l != nil || err != nil {
				return l, err
			}
		}
		p.Handoff = false
		wait := backoff.Wait(waits)
		if req.try.Fair {
			// Queued: a release hands the lock over and says so, so there
			// is nothing to poll for but a lost message or a lock freed
			// without a release: the next try, at the backoff's maximum
			// (at most a third of the ticket's life, to renew it), renews
			// the ticket and finds those.
			wait = family.Jitter(min(c.cfg.MaxBackoff, protocol.TicketTTL/3))
		}
		if res.PTTL > 0 && res.PTTL+time.Millisecond < wait {
			wait = res.PTTL + time.Millisecond // expires without a release
		}
		waits++

		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, notAcquired(ctx, req.name, nil)
		case u := <-w.Wake():
			waits = 0
			p.Handoff = true
			if l := c.handedOff(ctx, req, u.Msg, tries); l != nil {
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
// when m is no handoff to it, names a try it does not know, or the lock is
// gone by the time it looks.
//
// The release set the lock for the claim window only (protocol.ClaimTTL,
// at most the ticket's lifetime), so that a waiter that died holds it no
// longer; the lease counts that claim from the send of the try that m
// names: that try wrote the ticket the release used, so the handoff, and
// with it the key's ttl, came after it was sent, however late the message
// is read and whatever tries were sent since. The lease is returned at
// once and confirms the lock to the whole ttl later, in the background
// (lifetime.StartClaim). When the claim has less than half left (a message
// read late), one refresh to the whole ttl, timed from before it is sent,
// must confirm the lock first, with the message's Seq: the lock may have
// been handed to this waiter again since, with a newer token.
func (c *Client) handedOff(ctx context.Context, req request, m protocol.Message, tries recent) *Lease {
	if !m.Handoff || m.Holder != req.try.Holder || lifetime.Ended(ctx) != nil {
		return nil
	}
	if c.cfg.Replicas > 0 {
		// WithReplicaAck: the handed lock must be acknowledged like any
		// other. The next try, at once, finds it ours (Reacquired) and
		// sends WAIT with it.
		return nil
	}
	start, ok := tries.sent(m.Attempt)
	if !ok {
		return nil // not a try this Acquire knows: the next try finds out
	}
	claim := protocol.ClaimTTL(req.ttl)
	if time.Until(start.Add(lifetime.Validity(claim, c.cfg.DriftFactor))) < claim/2 {
		start, claim = time.Now(), req.ttl
		held, err := protocol.Refresh(ctx, c.rdb, req.keys, m.Holder, m.Seq, req.ttl)
		if err != nil || !held || lifetime.Ended(ctx) != nil {
			return nil // the next try, or the leave, finds out what became of it
		}
	}
	l := newClaimedLease(c, req, fence.Token{Key: req.name, Seq: m.Seq, Holder: m.Holder}, start, claim)
	if !l.Held() {
		return nil // paused past its deadline on the way: the next try finds out
	}
	return l
}

// recent remembers when the last tries of one Acquire were sent. A handoff
// names the try whose ticket it used, which is the latest try the server
// ran; tries are sequential, so only the last few can be named.
type recent struct {
	at [4]struct {
		a    protocol.Attempt
		sent time.Time
	}
	n int
}

func (r *recent) add(a protocol.Attempt, sent time.Time) {
	r.at[r.n%len(r.at)].a, r.at[r.n%len(r.at)].sent = a, sent
	r.n++
}

func (r recent) sent(a protocol.Attempt) (time.Time, bool) {
	for _, t := range r.at {
		if a != 0 && t.a == a {
			return t.sent, true
		}
	}
	return time.Time{}, false
}

// leave takes a fair waiter that gives up out of the queue and, if the lock
// was handed to it meanwhile, passes the lock on (not a re-acquire's: the
// lock under that holder id may be one it had before). It runs in the
// background, bounded, when ctx has ended; Close waits for it.
func (c *Client) leave(ctx context.Context, req request) {
	_ = c.pending.Detach(ctx, releaseTimeout, lifetime.CleanupBound(req.ttl), func(ctx context.Context) error {
		_, err := protocol.Leave(ctx, c.rdb, req.keys, c.release(req.try.Holder), !req.reacquire)
		return err
	})
}
