package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/holderid"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/internal/transport"
)

// Attempt is one acquisition across its tries.
type Attempt struct {
	s    *Strategy
	r    family.Request
	keys protocol.Keys
	// holder is the tries' holder id: WithHolder's, or a fresh one, made
	// again after a try whose cleanup ran, so that a key that cleanup may
	// leave behind is never taken for the next try's. (A fair waiter's id
	// is its place in the queue: its tries are never cleaned up but the
	// last.)
	holder string
	renew  bool
	tries  recent
	// busy is, per node, whether the last try found it busy or failing.
	busy []bool
	// one holds the reply of a try on one Redis, which costs no slice.
	one [1]Reply[protocol.TryResult]
	// spare is the backend of the first grant, allocated with the
	// attempt: an uncontended acquire costs one allocation less.
	spare     backend
	spareUsed bool
	// sem is the semaphore's keys when the request is for a permit
	// (Request.Permits), nil for a lock; slot is the slot the last try
	// or handoff got.
	sem  *protocol.Semaphore
	slot int
	// heldNothing: a try on one Redis found the lock (every slot) held by
	// others or reserved, so the holder id held nothing then (Abandon).
	heldNothing bool
}

// Begin starts an acquisition.
func (s *Strategy) Begin(r family.Request) family.Attempt {
	if r.Semaphore != nil {
		return &Attempt{s: s, r: r, keys: r.Semaphore.Keys, renew: true, sem: r.Semaphore}
	}
	return &Attempt{s: s, r: r, keys: s.cfg.Shared.Keys(r.Name), renew: true}
}

// fair reports whether the attempt's tries queue: a fair lock's, and a
// semaphore's, which is always fair.
func (a *Attempt) fair() bool { return a.s.cfg.Fair || a.sem != nil }

// Keys are the lock's keys.
func (a *Attempt) Keys() protocol.Keys { return a.keys }

// Name is the lock's name.
func (a *Attempt) Name() string { return a.r.Name }

// Strategy is the attempt's strategy.
func (a *Attempt) Strategy() *Strategy { return a.s }

// Busy reports whether node i was busy or failing at the last try; true
// before any.
func (a *Attempt) Busy(i int) bool { return a.busy == nil || a.busy[i] }

// newHolder is a fresh holder id.
func newHolder() string { return holderid.New() }

// reacquire: WithHolder, so the holder may have had the lock before.
func (a *Attempt) reacquire() bool { return a.r.Holder != "" }

// Try makes one try: the acquire script on every node at once. It
// succeeds when a quorum granted the lock (and, on several nodes, the time
// spent leaves validity: elapsed < ttl − drift). On failure, what it may
// have taken is undone (cleanup), and on several nodes the error wraps
// ErrNotAcquired with each failed node's error. On one node a busy lock is
// a nil error and a Miss. It stops waiting for the nodes as soon as no
// quorum is left.
func (a *Attempt) Try(ctx context.Context) (*family.Grant, family.Miss, error) {
	s, name, ttl := a.s, a.r.Name, a.r.TTL
	t := protocol.Try{Holder: a.holderID(), TTL: ttl, Counter: s.Counter(), Unfenced: s.cfg.Unfenced, Fair: a.fair()}
	if t.Fair && a.r.Waiting {
		t.Attempt = protocol.NewAttempt() // queues the waiter
	}
	if t.Fair {
		t.PubSub = s.cfg.Nodes[0].Caps().PubSub // a fair lock is on one node
	}
	start := time.Now()
	a.tries.add(t.Attempt, start)
	var rs []Reply[protocol.TryResult]
	var k ack
	switch {
	case s.cfg.Replicas > 0:
		a.one[0], k = a.tryAcked(ctx, t)
		rs = a.one[:]
	case s.one():
		a.one[0] = a.tryOne(ctx, t)
		rs = a.one[:]
	default:
		rs = Fanout(ctx, s, s.cfg.Nodes, s.timeout(ttl), a.acquireOp(t), decided(s, protocol.TryResult.Got))
	}

	granted, again, held, errs, timeouts, unawaited := 0, 0, 0, 0, 0, 0
	var seq, againSeq uint64
	for _, r := range rs {
		switch {
		case r.Err == ErrNotAwaited:
			unawaited++
		case r.Err != nil:
			errs++
			if s.slow(r.Err) {
				timeouts++
			}
		case r.Val.Got():
			granted++
			seq = max(seq, r.Val.Seq)
			if r.Val.Outcome == protocol.Reacquired {
				again++
				againSeq = max(againSeq, r.Val.Seq)
			}
		default:
			held++
		}
	}
	if again >= s.quorum {
		// WithHolder, and a quorum still had this holder's lock: the same
		// lease, with the same token.
		seq = againSeq
	}
	var why error
	switch {
	case granted < s.quorum && s.one():
		why = rs[0].Err // nil: busy
	case granted < s.quorum:
		why = fmt.Errorf("%w: %q: granted by %d of %d nodes, %d needed (held by another: %d, failed: %d, not awaited: %d)",
			s.cfg.Shared.NotAcquired, name, granted, len(rs), s.quorum, held, errs, unawaited)
	case s.cfg.Replicas > 0:
		why = a.notAcked(k, seq)
	case s.cfg.WriteBack != nil:
		why = s.cfg.WriteBack(ctx, a, rs, seq)
	}
	if why == nil && granted >= s.quorum && !s.one() {
		if elapsed, drift := time.Since(start), lifetime.Drift(ttl, s.cfg.Shared.DriftFactor); elapsed >= ttl-drift {
			why = fmt.Errorf("%w: %q: a majority took %v, which leaves no validity of the ttl %v (drift %v)",
				s.cfg.Shared.NotAcquired, name, elapsed.Round(time.Microsecond), ttl, drift)
		}
	}
	if why == nil && granted >= s.quorum && lifetime.Ended(ctx) != nil {
		// Clients that do not honour deadlines let the replies in after
		// ctx ended: the caller has gone, so the lock must not stay taken.
		why = fmt.Errorf("%w: %q: the context ended as the lock was granted", s.cfg.Shared.NotAcquired, name)
	}
	if why == nil && granted >= s.quorum {
		tok := fence.Token{Key: name, Seq: seq, Holder: a.holder}
		return a.grant(tok, start), family.Miss{}, nil
	}

	a.noteBusy(rs)
	undo := a.cleanup(ctx, rs)
	if a.r.Holder == "" && undo.started {
		a.renew = true
	}
	m := family.Miss{
		Remaining: freeAt(s.quorum, rs),
		// On one node every error of a live context is the service's.
		Unavailable: errs-timeouts > len(rs)-s.quorum,
		NoMajority:  errs+unawaited > len(rs)-s.quorum,
	}
	if s.one() {
		if why == nil { // busy
			a.heldNothing = true
			m.Queued = rs[0].Val.Outcome == protocol.Reserved
			if a.fair() && a.r.Waiting {
				// Queued: a release hands the lock over and says so; the
				// next try, at most a third of the ticket's life away,
				// renews the ticket and finds a lost message.
				m.Poll = family.Jitter(min(s.cfg.Shared.MaxBackoff, protocol.TicketTTL/3))
			}
			return nil, m, nil
		}
		if lifetime.Ended(ctx) != nil {
			return nil, family.Miss{}, why
		}
		return nil, family.Miss{Unavailable: true}, fmt.Errorf("lease: acquire %q: %w", name, sentinel.Join(why, undo.err))
	}
	return nil, m, sentinel.Join(why, Failed(rs), undo.err)
}

// grant is the lease a try or a handoff obtained with tok, counted from
// start.
func (a *Attempt) grant(tok fence.Token, start time.Time) *family.Grant {
	b := &a.spare
	if a.spareUsed {
		b = new(backend)
	}
	a.spareUsed = true
	keys := a.keys
	if a.sem != nil {
		// A permit is a lease on its slot, named for it: its tokens are
		// the slot's.
		keys, tok.Key = a.sem.Slot(a.slot), protocol.PermitName(a.r.Name, a.slot)
	}
	*b = backend{s: a.s, keys: keys, tok: tok, ttl: a.r.TTL, pending: a.r.Pending}
	b.grant = family.Grant{Token: tok, Start: start, Backend: b}
	return &b.grant
}

// tryOne is a try on one Redis, inline, its server probed when it is slow
// to answer so that an error names a refused dial: the lock's script, or
// the semaphore's (tryPermit).
func (a *Attempt) tryOne(ctx context.Context, t protocol.Try) Reply[protocol.TryResult] {
	n := a.s.cfg.Nodes[0]
	res, sent, err := transport.Watch(ctx, n.Probe, 0, func(ctx context.Context) (protocol.TryResult, transport.Sent, error) {
		return transport.Send(ctx, n.Tr, func(ctx context.Context, c transport.Conn) (protocol.TryResult, error) {
			if a.sem != nil {
				return a.tryPermit(ctx, c, t)
			}
			return protocol.Acquire(ctx, c, a.keys, t)
		})
	})
	return Reply[protocol.TryResult]{Val: res, Err: err, Sent: sent, In: true}
}

// acquireOp is a try on one node.
func (a *Attempt) acquireOp(t protocol.Try) Op[protocol.TryResult] {
	if t.Unfenced && !a.reacquire() {
		// No counter and nothing to compare: a plain SET NX PX is enough,
		// and cheaper for the node than a script.
		return func(ctx context.Context, n *Node, c transport.Conn) (protocol.TryResult, error) {
			return protocol.AcquireUnfenced(ctx, c, a.keys, t.Holder, t.TTL)
		}
	}
	return func(ctx context.Context, n *Node, c transport.Conn) (protocol.TryResult, error) {
		return protocol.Acquire(ctx, c, a.keys, t)
	}
}

// decided is a Fanout's settled func for a call decided by a quorum: it
// stops waiting at once when so many nodes said no (or failed) that no
// quorum can say yes; once a quorum said yes, with the default node
// timeout, after MinNodeTimeout more for the rest (a node that is frozen
// then costs a call no more than that, while a node that is only slow,
// under a burst, has the whole node timeout to make the quorum). A node
// timeout set explicitly is waited for whole: what answers in it takes
// quorum fencing's write-back.
func decided[T any](s *Strategy, yes func(T) bool) func([]Reply[T]) time.Duration {
	return func(rs []Reply[T]) time.Duration {
		y, n := 0, 0
		for _, r := range rs {
			switch {
			case !r.In:
			case r.Err == nil && yes(r.Val):
				y++
			default:
				n++
			}
		}
		switch {
		case n > len(rs)-s.quorum:
			return 0
		case y >= s.quorum && s.cfg.NodeTimeout == 0:
			return max(s.cfg.MinNodeTimeout, time.Millisecond)
		}
		return -1
	}
}

// slow reports whether a node only did not answer in time: a node timeout
// with no refused dial to the node meanwhile (a node whose dial is refused
// is down, not slow).
func (s *Strategy) slow(err error) bool {
	var dial *transport.DialError
	return s.cfg.ErrNodeTimeout != nil && errors.Is(err, s.cfg.ErrNodeTimeout) && !errors.As(err, &dial)
}

// noteBusy records, per node, whether the try's reply said busy or failed:
// only those nodes' releases can free a quorum.
func (a *Attempt) noteBusy(rs []Reply[protocol.TryResult]) {
	if len(a.busy) != len(rs) {
		a.busy = make([]bool, len(rs))
	}
	for i, r := range rs {
		a.busy[i] = r.Err != nil || !r.Val.Got()
	}
}

// freeAt estimates, from the remaining ttls the busy nodes reported, how
// long until a quorum of nodes is free; 0 when it cannot tell, -1 when a
// node it needs holds a key without a ttl (it may never be free).
func freeAt(quorum int, rs []Reply[protocol.TryResult]) time.Duration {
	free := 0
	var busy []time.Duration
	for _, r := range rs {
		switch {
		case r.Err != nil:
		case r.Val.Got(): // released again by the cleanup
			free++
		case r.Val.PTTL >= 0:
			busy = append(busy, r.Val.PTTL)
		default: // a key without a ttl: it may never be free
			busy = append(busy, protocol.NoTTL)
		}
	}
	need := quorum - free
	if need <= 0 || need > len(busy) {
		return 0
	}
	slices.Sort(busy)
	if busy[need-1] == protocol.NoTTL {
		return -1 // unknown (HeldError: "for a time unknown")
	}
	return busy[need-1]
}

// tryAcked is a try followed by WAIT on the try's connection (replica
// acknowledgement, one node), with how many replicas acknowledged. It is
// the one call that does not go through the node's transport: WAIT must
// follow the script down its own connection, not a pipeline shared with
// other callers, and on a Cluster down the connection of the lock's
// master.
func (a *Attempt) tryAcked(ctx context.Context, t protocol.Try) (Reply[protocol.TryResult], ack) {
	n := a.s.cfg.Nodes[0]
	var k ack
	res, sent, err := transport.Watch(ctx, n.Probe, 0, transport.Plain(func(ctx context.Context) (protocol.TryResult, error) {
		var conn protocol.Pipeliner = n.RDB
		if cc, ok := n.RDB.(*redis.ClusterClient); ok {
			m, err := cc.MasterForKey(ctx, a.keys.Lock)
			if err != nil {
				return protocol.TryResult{}, err
			}
			conn = m
		}
		r, acked, err := protocol.AcquireAcked(ctx, conn, a.keys, t, a.s.cfg.Replicas, a.s.cfg.AckTimeout)
		if err != nil && r.Got() { // the script took the lock, WAIT failed
			k.err = err
			return r, nil
		}
		k.acked = acked
		return r, err
	}))
	if k.err != nil {
		sent = transport.Ran
	}
	return Reply[protocol.TryResult]{Val: res, Err: err, Sent: sent, In: true}, k
}

// ack is what WAIT said after a try that took the lock.
type ack struct {
	acked int64
	err   error
}

// notAcked is why a replica-acknowledged try that took the lock with seq
// fails, or nil.
func (a *Attempt) notAcked(k ack, seq uint64) error {
	switch {
	case k.err != nil:
		return k.err
	case k.acked < int64(a.s.cfg.Replicas):
		return &notReplicatedError{notReplicated: a.s.cfg.Shared.NotReplicated, name: a.r.Name, seq: seq,
			acked: k.acked, want: a.s.cfg.Replicas, timeout: a.s.cfg.AckTimeout}
	}
	return nil
}

// notReplicatedError wraps lease's ErrNotReplicated with the figures.
type notReplicatedError struct {
	notReplicated error
	name          string
	seq           uint64
	acked         int64
	want          int
	timeout       time.Duration
}

func (e *notReplicatedError) Error() string {
	return fmt.Sprintf("%v: %q seq %d: %d of %d replicas acknowledged within %v; released",
		e.notReplicated, e.name, e.seq, e.acked, e.want, e.timeout)
}

func (e *notReplicatedError) Unwrap() error { return e.notReplicated }
