package quorum

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/transport"
)

// waker is a waiter on one node: its registration on the lock's release
// channel, through the node's one pub/sub connection. A fair release
// hands the lock to it in the message.
type waker struct {
	a *Attempt
	n *Node
	w *notify.Waiter
}

// Joined returns a waker at no I/O cost when the client already listens
// for this lock's releases (one node only); nil otherwise.
func (a *Attempt) Joined() family.Waker {
	if a.s.cfg.Listen != nil || !a.s.one() {
		return nil
	}
	n := a.s.cfg.Nodes[0]
	if w := n.Notify.Join(a.keys.Channel, a.holderID()); w != nil {
		return &waker{a: a, n: n, w: w}
	}
	return nil
}

// Listen starts listening for the lock's releases (Config.Listen's way
// when set), waiting briefly for the subscription.
func (a *Attempt) Listen(ctx context.Context) family.Waker {
	if a.s.cfg.Listen != nil {
		return a.s.cfg.Listen(ctx, a)
	}
	n := a.s.cfg.Nodes[0]
	w := n.Notify.Register(ctx, a.keys.Channel, a.holderID())
	w.WaitReady(ctx)
	return &waker{a: a, n: n, w: w}
}

// holderID is the id a release message names this waiter by: the
// attempt's holder, which a fair waiter keeps across its tries. Before
// the first try it is made now.
func (a *Attempt) holderID() string {
	if a.renew {
		a.holder, a.renew = a.r.Holder, false
		if a.holder == "" {
			a.holder = newHolder()
		}
	}
	return a.holder
}

func (w *waker) BeforeTry() {}

// Got drops the wake-up of the release that the winning try took.
func (w *waker) Got() { w.w.Drain() }

func (w *waker) Close() { w.n.Notify.Unregister(w.w) }

func (w *waker) Wait(ctx context.Context, d time.Duration, _ family.Miss) (*family.Grant, bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case u := <-w.w.Wake():
		return w.a.handedOff(ctx, w.n, u.Msg), true, nil
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
func (a *Attempt) handedOff(ctx context.Context, n *Node, m protocol.Message) *family.Grant {
	if !m.Handoff || m.Holder != a.holder || m.Permit != (a.sem != nil) || lifetime.Ended(ctx) != nil {
		return nil
	}
	if a.s.cfg.Replicas > 0 {
		// WithReplicaAck: the handed lock must be acknowledged like any
		// other. The next try, at once, finds it ours and sends WAIT.
		return nil
	}
	start, ok := a.tries.sent(m.Attempt)
	if !ok {
		return nil // not a try this Acquire knows: the next try finds out
	}
	keys := a.keys
	if a.sem != nil {
		a.slot, keys = m.Slot, a.sem.Slot(m.Slot) // the slot handed over
	}
	claim := protocol.ClaimTTL(a.r.TTL)
	if time.Until(start.Add(lifetime.Validity(claim, a.s.cfg.Shared.DriftFactor))) < claim/2 {
		start, claim = time.Now(), a.r.TTL
		held, _, err := transport.Send(ctx, n.Tr, func(ctx context.Context, c transport.Conn) (bool, error) {
			return protocol.Refresh(ctx, c, keys, m.Holder, m.Seq, a.r.TTL)
		})
		if err != nil || !held || lifetime.Ended(ctx) != nil {
			return nil // the next try, or the leave, finds out what became of it
		}
	}
	g := a.grant(fence.Token{Key: a.r.Name, Seq: m.Seq, Holder: m.Holder}, start)
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
