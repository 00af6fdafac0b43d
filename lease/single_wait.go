package lease

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/protocol"
)

// singleWaker is a waiter on one Redis: its registration on the lock's
// release channel, through the client's one pub/sub connection.
type singleWaker struct {
	a *singleAttempt
	w *notify.Waiter
}

func (a *singleAttempt) Joined() family.Waker {
	if w := a.s.notify.Join(a.keys.Channel, a.try.Holder); w != nil {
		return &singleWaker{a: a, w: w}
	}
	return nil
}

func (a *singleAttempt) Listen(ctx context.Context) family.Waker {
	w := a.s.notify.Register(ctx, a.keys.Channel, a.try.Holder)
	w.WaitReady(ctx)
	return &singleWaker{a: a, w: w}
}

func (w *singleWaker) BeforeTry() {}

// Got drops the wake-up of the release that the winning try took.
func (w *singleWaker) Got() { w.w.Drain() }

func (w *singleWaker) Close() { w.a.s.notify.Unregister(w.w) }

func (w *singleWaker) Wait(ctx context.Context, d time.Duration, _ family.Miss) (*family.Grant, bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case u := <-w.w.Wake():
		return w.a.handedOff(ctx, u.Msg), true, nil
	case <-timer.C:
		return nil, false, nil
	}
}

// handedOff returns the grant a fair release handed to this waiter, or nil
// when m is no handoff to it, names a try it does not know, or the lock is
// gone by the time it looks.
//
// The release set the lock for the claim window only (protocol.ClaimTTL,
// at most the ticket's lifetime), so that a waiter that died holds it no
// longer; the lease counts that claim from the send of the try that m
// names: that try wrote the ticket the release used, so the handoff, and
// with it the key's ttl, came after it was sent, however late the message
// is read. The lease is returned at once and confirms the lock to the
// whole ttl later, in the background (lifetime.StartClaim). When the claim
// has less than half left (a message read late), one refresh to the whole
// ttl, timed from before it is sent, must confirm the lock first, with the
// message's Seq: the lock may have been handed to this waiter again since,
// with a newer token.
func (a *singleAttempt) handedOff(ctx context.Context, m protocol.Message) *family.Grant {
	if !m.Handoff || m.Holder != a.try.Holder || lifetime.Ended(ctx) != nil {
		return nil
	}
	if a.s.cfg.Single.Replicas > 0 {
		// WithReplicaAck: the handed lock must be acknowledged like any
		// other. The next try, at once, finds it ours and sends WAIT.
		return nil
	}
	start, ok := a.tries.sent(m.Attempt)
	if !ok {
		return nil // not a try this Acquire knows: the next try finds out
	}
	claim := protocol.ClaimTTL(a.r.TTL)
	if time.Until(start.Add(lifetime.Validity(claim, a.s.cfg.DriftFactor))) < claim/2 {
		start, claim = time.Now(), a.r.TTL
		held, err := protocol.Refresh(ctx, a.s.rdb, a.keys, m.Holder, m.Seq, a.r.TTL)
		if err != nil || !held || lifetime.Ended(ctx) != nil {
			return nil // the next try, or the leave, finds out what became of it
		}
	}
	g := a.grant(m.Seq, start)
	g.Token = fence.Token{Key: a.r.Name, Seq: m.Seq, Holder: m.Holder}
	g.Claim = claim
	return g
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
