package quorum

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/internal/transport"
)

// backend is the one lease backend: a lease's refreshes, release and
// reissues on the nodes, each decided by a quorum of them.
//
// Refresh extends the lock where its holder still has it (with SetAgain,
// it sets it again on a node that lost it, which does not count toward the
// quorum, and with quorum fencing gives it the token's Seq back); it
// succeeds only when a quorum still held it. Release deletes the lock on
// every node that still holds it, and retries in the background, within
// the cleanup bound, the nodes that did not answer: a key left behind
// costs every waiter its ttl. Reissue lifts the counters and gives a new
// Seq above them, written back to a quorum.
type backend struct {
	grant   family.Grant // the grant that hands this backend out (one allocation for both)
	s       *Strategy
	keys    protocol.Keys
	tok     fence.Token // Key and Holder; Seq is the lifetime's
	ttl     time.Duration
	pending *lifetime.Pending
}

func (b *backend) Refresh(ctx context.Context, tok fence.Token, ttl time.Duration) error {
	s, name := b.s, b.tok.Key
	op := func(ctx context.Context, n *Node, c transport.Conn) (protocol.Outcome, error) {
		ok, err := protocol.Refresh(ctx, c, b.keys, tok.Holder, tok.Seq, ttl)
		if ok {
			return protocol.Reacquired, err
		}
		return protocol.Held, err
	}
	if s.cfg.SetAgain {
		t := protocol.Try{Holder: b.tok.Holder, TTL: ttl, Counter: s.Counter(), Unfenced: s.cfg.Unfenced}
		op = func(ctx context.Context, n *Node, c transport.Conn) (protocol.Outcome, error) {
			r, err := protocol.Acquire(ctx, c, b.keys, t)
			return r.Outcome, err
		}
	}
	rs := Fanout(ctx, s, s.cfg.Nodes, s.timeout(ttl), op, decided(s, func(o protocol.Outcome) bool { return o == protocol.Reacquired }))
	held, gone := 0, 0
	var reset []*Node
	for i, r := range rs {
		switch {
		case r.Err != nil:
		case r.Val == protocol.Reacquired:
			held++
		case r.Val == protocol.Acquired: // set again
			gone++
			reset = append(reset, s.cfg.Nodes[i])
		default: // gone, or another holder has it there
			gone++
		}
	}
	switch {
	case gone > len(rs)-s.quorum && s.one():
		return fmt.Errorf("%w: %q is no longer held by %s with Seq %d", s.cfg.Shared.Lost, name, tok.Holder, tok.Seq)
	case gone > len(rs)-s.quorum:
		_ = s.retry(detached(ctx), b.pending, b.ttl, targets(s.cfg.Nodes), nil, s.unlockOp(b.keys, b.tok.Holder))
		return sentinel.Join(fmt.Errorf("%w: %q: refresh found it gone from %d of %d nodes", s.cfg.Shared.Lost, name, gone, len(rs)),
			Failed(rs))
	case held < s.quorum && s.one():
		return fmt.Errorf("%s: refresh %q: %w", s.cfg.Name, name, rs[0].Err)
	case held < s.quorum:
		return sentinel.Join(fmt.Errorf("%s: refresh %q: confirmed on %d of %d nodes, %d needed; the deadline is unchanged",
			s.cfg.Name, name, held, len(rs), s.quorum), lifetime.Ended(ctx), Failed(rs))
	}
	if !s.cfg.Unfenced && len(reset) > 0 {
		Fanout(ctx, s, reset, s.timeout(ttl), adoptOp(b.keys, b.tok.Holder, tok.Seq, s.Counter()), nil)
	}
	return nil
}

func (b *backend) Release(ctx context.Context) error {
	s := b.s
	var one [1]Reply[bool] // one Redis: no slice allocated
	var rs []Reply[bool]
	if s.one() {
		one[0] = inline(ctx, s, s.cfg.Nodes[0], s.timeout(b.ttl), s.unlockOp(b.keys, b.tok.Holder))
		rs = one[:]
	} else {
		rs = Fanout(ctx, s, s.cfg.Nodes, s.timeout(b.ttl), s.unlockOp(b.keys, b.tok.Holder), nil)
	}
	gone := 0
	var again []target
	for i, r := range rs {
		switch {
		case r.Err == nil && !r.Val:
			gone++
		case r.Err != nil && r.Sent != transport.Ran:
			again = append(again, target{n: s.cfg.Nodes[i]})
		}
	}
	if len(again) > 0 {
		_ = s.retry(detached(ctx), b.pending, b.ttl, again, nil, s.unlockOp(b.keys, b.tok.Holder))
	}
	switch {
	case gone > len(rs)-s.quorum && s.one():
		return fmt.Errorf("%w: %q was no longer held by %s at release", s.cfg.Shared.Lost, b.tok.Key, b.tok.Holder)
	case gone > len(rs)-s.quorum:
		return sentinel.Join(fmt.Errorf("%w: %q: %d of %d nodes no longer had it at release", s.cfg.Shared.Lost, b.tok.Key, gone, len(rs)),
			Failed(rs))
	case s.one() && rs[0].Err != nil:
		return fmt.Errorf("%s: release %q: %w", s.cfg.Name, b.tok.Key, rs[0].Err)
	}
	return Failed(rs)
}

func (b *backend) Reissue(ctx context.Context, floor uint64) (uint64, error) {
	s, name := b.s, b.tok.Key
	if s.cfg.Unfenced {
		return 0, fmt.Errorf("%w: %s: reissue %q: tokens need WithQuorumFencing", s.cfg.Shared.Invalid, s.cfg.Name, name)
	}
	rs := Fanout(ctx, s, s.cfg.Nodes, s.timeout(b.ttl), func(ctx context.Context, n *Node, c transport.Conn) (uint64, error) {
		return protocol.Reissue(ctx, c, b.keys, b.tok.Holder, floor, s.Counter())
	}, nil)
	held, gone, seq := 0, 0, uint64(0)
	for _, r := range rs {
		switch {
		case r.Err != nil:
		case r.Val > 0:
			held++
			seq = max(seq, r.Val)
		default:
			gone++
		}
	}
	switch {
	case gone > len(rs)-s.quorum && s.one():
		return 0, fmt.Errorf("%w: %q is no longer held by %s", s.cfg.Shared.Lost, name, b.tok.Holder)
	case gone > len(rs)-s.quorum:
		return 0, sentinel.Join(fmt.Errorf("%w: %q: reissue found it gone from %d of %d nodes", s.cfg.Shared.Lost, name, gone, len(rs)),
			Failed(rs))
	case held < s.quorum && s.one():
		return 0, fmt.Errorf("%s: reissue %q: %w", s.cfg.Name, name, rs[0].Err)
	case held < s.quorum:
		return 0, sentinel.Join(fmt.Errorf("%s: reissue %q: held on %d of %d nodes, %d needed; the token is unchanged",
			s.cfg.Name, name, held, len(rs), s.quorum), lifetime.Ended(ctx), Failed(rs))
	}
	// Every node that answered with less than seq takes seq: its counter,
	// and its lock's Seq where it holds the lease.
	have := 0
	var lag []*Node
	for i, r := range rs {
		switch {
		case r.Err != nil:
		case r.Val == seq:
			have++
		default:
			lag = append(lag, s.cfg.Nodes[i])
		}
	}
	if len(lag) == 0 {
		return seq, nil
	}
	out := Fanout(ctx, s, lag, s.timeout(b.ttl), adoptOp(b.keys, b.tok.Holder, seq, s.Counter()), nil)
	for _, r := range out {
		if r.Err == nil {
			have++
		}
	}
	if have < s.quorum {
		return 0, sentinel.Join(fmt.Errorf("%s: reissue %q: Seq %d reached %d of %d nodes, %d needed; the token is unchanged",
			s.cfg.Name, name, seq, have, len(rs), s.quorum), lifetime.Ended(ctx), Failed(out))
	}
	return seq, nil
}

// adoptOp gives a node seq: its counter, and its lock's Seq where holder
// holds it.
func adoptOp(k protocol.Keys, holder string, seq uint64, counter protocol.Counter) Op[uint64] {
	return func(ctx context.Context, n *Node, c transport.Conn) (uint64, error) {
		return protocol.Adopt(ctx, c, k, holder, seq, counter)
	}
}

// Adopt gives nodes seq (quorum fencing's write-back), each bounded by the
// node timeout.
func (a *Attempt) Adopt(ctx context.Context, nodes []*Node, seq uint64) []Reply[uint64] {
	return Fanout(ctx, a.s, nodes, a.s.timeout(a.r.TTL), adoptOp(a.keys, a.holder, seq, a.s.Counter()), nil)
}
