// Package quorum is the one lease backend under package lease's client,
// for every kind: a lock on N Redis nodes granted by a quorum q of them,
// where one Redis is a quorum of one (N = q = 1, whose calls are made
// inline). A [Node] owns a server's client, notifier, prober, transport and
// capabilities; [Fanout] calls the nodes; a failed try is undone by one
// cleanup policy (cleanup.go); and one lease backend refreshes, releases
// and reissues (backend.go). What only one Redis can do (fair handoff,
// replica acknowledgement, Cluster routing of WAIT) is an option that needs
// exactly one node. Package lease/redlock adds what only a quorum of
// several masters has: quorum fencing's write-back and its wake-up policy.
package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/internal/transport"
	"github.com/fencelock/fencelock/observe"
)

// Config is what makes a kind of the one strategy.
type Config struct {
	// Shared is the client's configuration (prefix, counter, drift,
	// backoff, hooks, the sentinels).
	Shared *family.Config
	Kind   observe.Kind
	// Name prefixes the kind's own error messages: "lease" or "redlock".
	Name  string
	Nodes []*Node
	// Quorum: the nodes are a quorum of masters (redlock), whose errors
	// and states name each node, even when there is one; else the one
	// node is one Redis, and they are its own.
	Quorum bool
	// NodeTimeout bounds each node's call of a quorum; 0 is a tenth of the
	// lock's ttl, at least MinNodeTimeout (for calls without a ttl,
	// MinNodeTimeout). One Redis has none: its calls end with the caller's
	// context.
	NodeTimeout, MinNodeTimeout time.Duration
	// ErrNodeTimeout is wrapped by the error of a node that did not answer
	// within NodeTimeout; NodeError, when set, wraps every node's error.
	ErrNodeTimeout error
	NodeError      func(addr string, err error) error
	// Unfenced: no counter is kept, tokens have Seq 0 and Reissue is
	// refused (Redlock without quorum fencing).
	Unfenced bool
	// SetAgain: a refresh sets the lock again on a node that lost it (one
	// that restarted), instead of only checking it.
	SetAgain bool
	// WriteBack, when set, runs after a majority granted the lock with Seq
	// seq: quorum fencing's write-back.
	WriteBack func(ctx context.Context, a *Attempt, rs []Reply[protocol.TryResult], seq uint64) error
	// Listen, when set, makes a waiting acquire's waker instead of the
	// one-node waker.
	Listen func(ctx context.Context, a *Attempt) family.Waker
	// Fair, Replicas and AckTimeout are the options that need exactly one
	// node (see family.OneRedis).
	family.OneRedis
}

// Strategy is the one family.Strategy: a lock on cfg.Nodes, granted by a
// majority of them.
type Strategy struct {
	cfg     Config
	quorum  int
	workers *workers
}

// New returns the strategy of cfg; cfg.Nodes must be valid (non-nil,
// distinct) already. An option of one Redis given more than one node is
// invalid.
func New(cfg Config) (*Strategy, error) {
	n := len(cfg.Nodes)
	switch {
	case n == 0:
		return nil, cfg.Shared.Invalidf("%s: no nodes", cfg.Name)
	case !cfg.Quorum && n != 1:
		return nil, cfg.Shared.Invalidf("%s: one Redis is one node, not %d", cfg.Name, n)
	case cfg.Quorum && cfg.OneRedis != (family.OneRedis{}):
		return nil, cfg.Shared.Invalidf("%s: fair handoff and replica acknowledgement need one Redis", cfg.Name)
	}
	return &Strategy{cfg: cfg, quorum: n/2 + 1, workers: newWorkers()}, nil
}

// nodeTimeout is the error of a node the caller stopped waiting for after
// d; the cause is only named, so that the error is not
// context.DeadlineExceeded. A refused dial to the node meanwhile stays in
// the chain.
func (c *Config) nodeTimeout(d time.Duration, cause error) error {
	var dial *transport.DialError
	switch {
	case cause == nil:
		return fmt.Errorf("%w (%v)", c.ErrNodeTimeout, d)
	case errors.As(cause, &dial):
		return transport.Named(fmt.Errorf("%w (%v)", c.ErrNodeTimeout, d), dial)
	}
	return fmt.Errorf("%w (%v): %v", c.ErrNodeTimeout, d, cause)
}

// Nodes returns the nodes, in the order given.
func (s *Strategy) Nodes() []*Node { return s.cfg.Nodes }

// Quorum returns how many nodes make a majority.
func (s *Strategy) Quorum() int { return s.quorum }

// timeout is the bound of each node's call on a lock of ttl; 0 for none.
// A release is worth waiting for (a key left behind costs every waiter its
// ttl), and a burst of waiters queues calls behind each other's: so, by
// default, a tenth of the ttl, as redsync waits, but at least the minimum.
func (s *Strategy) timeout(ttl time.Duration) time.Duration {
	switch {
	case s.one():
		return 0
	case s.cfg.NodeTimeout > 0:
		return s.cfg.NodeTimeout
	}
	return max(s.cfg.MinNodeTimeout, ttl/10)
}

// MinBackoff is the shortest wait of a waiting acquire.
func (s *Strategy) MinBackoff() time.Duration { return s.cfg.Shared.MinBackoff }

// Counter is how the client keeps a lock's counter.
func (s *Strategy) Counter() protocol.Counter { return s.cfg.Shared.Counter() }

// Kind names the kind in hooks' events.
func (s *Strategy) Kind() observe.Kind { return s.cfg.Kind }

// one reports whether the strategy is on one Redis (not a quorum).
func (s *Strategy) one() bool { return !s.cfg.Quorum }

// Advance lifts the counter on every node and succeeds when a majority
// took it. It returns the smallest counter among those nodes: any later
// majority shares a node with them, so the next token is greater.
func (s *Strategy) Advance(ctx context.Context, name string, floor uint64) (uint64, error) {
	k, counter := s.cfg.Shared.Keys(name), s.Counter()
	rs := Fanout(ctx, s, s.cfg.Nodes, s.timeout(0), func(ctx context.Context, n *Node, c transport.Conn) (uint64, error) {
		return protocol.Advance(ctx, c, k, floor, counter)
	}, nil)
	ok, low := 0, uint64(0)
	for _, r := range rs {
		if r.Err == nil {
			if ok == 0 || r.Val < low {
				low = r.Val
			}
			ok++
		}
	}
	if ok < s.quorum {
		return 0, short(s, rs, "%d of %d nodes took it, %d needed", ok, len(rs), s.quorum)
	}
	return low, nil
}

// short is the error of a call that too few nodes answered: on one node,
// that node's error.
func short[T any](s *Strategy, rs []Reply[T], format string, args ...any) error {
	if s.one() {
		return rs[0].Err
	}
	return Joinf(Failed(rs), format, args...)
}

// Inspect reads the lock on every node at once and makes the majority's
// view of it; on one node, that node's.
func (s *Strategy) Inspect(ctx context.Context, name string) (family.State, error) {
	k := s.cfg.Shared.Keys(name)
	rs := Fanout(ctx, s, s.cfg.Nodes, s.timeout(0), func(ctx context.Context, n *Node, c transport.Conn) (protocol.State, error) {
		return protocol.Inspect(ctx, c, k)
	}, nil)
	if s.one() {
		st := rs[0].Val
		return family.State{Holder: st.Holder, Seq: st.Seq, TTL: st.PTTL, LastSeq: st.LastSeq, Queued: st.Queued, Head: st.Head}, rs[0].Err
	}
	st := family.State{Nodes: make([]family.NodeState, len(rs))}
	answered := 0
	ttls := map[string][]time.Duration{}
	for i, r := range rs {
		ns := family.NodeState{Addr: s.cfg.Nodes[i].Addr, Err: r.Err}
		if r.Err == nil {
			answered++
			v := r.Val
			ns.State = family.State{Holder: v.Holder, Seq: v.Seq, TTL: v.PTTL, LastSeq: v.LastSeq}
			if v.Holder != "" {
				ttls[v.Holder] = append(ttls[v.Holder], v.PTTL)
			}
			st.LastSeq = max(st.LastSeq, v.LastSeq)
		}
		st.Nodes[i] = ns
	}
	for h, ds := range ttls {
		if len(ds) < s.quorum {
			continue
		}
		slices.Sort(ds)
		st.Holder, st.TTL = h, ds[len(ds)-s.quorum]
		for _, n := range st.Nodes {
			if n.Err == nil && n.State.Holder == h {
				st.Seq = max(st.Seq, n.State.Seq)
			}
		}
	}
	if answered < s.quorum {
		return st, Joinf(Failed(rs), "%d of %d nodes answered, %d needed", answered, len(rs), s.quorum)
	}
	return st, nil
}

// Close stops the senders of the nodes' transports, waiting for them until
// ctx ends.
func (s *Strategy) Close(ctx context.Context) error {
	var errs []error
	for _, n := range s.cfg.Nodes {
		if err := n.Tr.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Joinf is a quorum's failure with the nodes' errors, on one line.
func Joinf(nodes error, format string, args ...any) error {
	return sentinel.Join(fmt.Errorf(format, args...), nodes)
}

var _ family.Strategy = (*Strategy)(nil)

// OneRedis reports whether the strategy is one Redis, not a quorum of
// masters.
func (s *Strategy) OneRedis() bool { return s.one() }

// InspectSemaphore reads the semaphore sem, on one Redis.
func (s *Strategy) InspectSemaphore(ctx context.Context, sem *protocol.Semaphore) (protocol.SemaphoreState, error) {
	r := inline(ctx, s, s.cfg.Nodes[0], 0, func(ctx context.Context, _ *Node, c transport.Conn) (protocol.SemaphoreState, error) {
		return protocol.InspectSemaphore(ctx, c, *sem)
	})
	return r.Val, r.Err
}
