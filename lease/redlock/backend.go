package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

// quorumLease is the quorum's side of a lease's lifetime.
//
// Refresh runs the acquire script with re-acquire on every node: where a
// node still holds the lease that resets its ttl, where the key is gone it
// sets it again. It succeeds only if a majority still held the lease (keys
// set again do not count); with quorum fencing, nodes set again get the
// token's Seq back. Release deletes the key on every node that still holds
// it. Reissue lifts the counters and gives a new Seq above them, written
// back to a majority.
type quorumLease struct {
	q       *quorum
	keys    protocol.Keys
	tok     fence.Token // Key and Holder; Seq is the lifetime's
	pending *lifetime.Pending
}

func (b *quorumLease) Refresh(ctx context.Context, tok fence.Token, ttl time.Duration) error {
	q, name := b.q, b.tok.Key
	rs := fanout(ctx, q.nodes, q.set.nodeTimeout, acquireOp(b.keys, q.tryFor(b.tok.Holder, ttl), true), nil)
	held, gone := 0, 0
	var reset []node
	for i, r := range rs {
		switch {
		case r.err != nil:
		case r.val.Outcome == protocol.Reacquired:
			held++
		case r.val.Outcome == protocol.Acquired:
			gone++
			reset = append(reset, q.nodes[i])
		default: // another holder has it there
			gone++
		}
	}
	switch {
	case gone > len(q.nodes)-q.quorum:
		q.releaseInBackground(ctx, b.pending, b.keys, b.tok.Holder)
		return sentinel.Join(fmt.Errorf("%w: %q: refresh found it gone from %d of %d nodes", lease.ErrLost, name, gone, len(q.nodes)),
			failed(rs))
	case held < q.quorum:
		return sentinel.Join(fmt.Errorf("redlock: refresh %q: confirmed on %d of %d nodes, %d needed; the deadline is unchanged",
			name, held, len(q.nodes), q.quorum), lifetime.Ended(ctx), failed(rs))
	}
	if q.set.quorumFencing && len(reset) > 0 {
		fanout(ctx, reset, q.set.nodeTimeout, adoptOp(b.keys, b.tok.Holder, tok.Seq, q.cfg.Counter()), nil)
	}
	return nil
}

func (b *quorumLease) Release(ctx context.Context) error {
	q := b.q
	rs := fanout(ctx, q.nodes, q.set.nodeTimeout, releaseOp(b.keys, b.tok.Holder), nil)
	gone := 0
	for _, r := range rs {
		if r.err == nil && !r.val {
			gone++
		}
	}
	var why error
	if gone > len(q.nodes)-q.quorum {
		why = fmt.Errorf("%w: %q: %d of %d nodes no longer had it at release", lease.ErrLost, b.tok.Key, gone, len(q.nodes))
	}
	return sentinel.Join(why, failed(rs))
}

func (b *quorumLease) Reissue(ctx context.Context, floor uint64) (uint64, error) {
	q, name := b.q, b.tok.Key
	if !q.set.quorumFencing {
		return 0, fmt.Errorf("%w: redlock: reissue %q: tokens need WithQuorumFencing", lease.ErrInvalid, name)
	}
	rs := fanout(ctx, q.nodes, q.set.nodeTimeout, func(ctx context.Context, n node, c family.Conn) (uint64, error) {
		return protocol.Reissue(ctx, c, b.keys, b.tok.Holder, floor, q.cfg.Counter())
	}, nil)
	held, gone, seq := 0, 0, uint64(0)
	for _, r := range rs {
		switch {
		case r.err != nil:
		case r.val > 0:
			held++
			seq = max(seq, r.val)
		default:
			gone++
		}
	}
	switch {
	case gone > len(q.nodes)-q.quorum:
		return 0, sentinel.Join(fmt.Errorf("%w: %q: reissue found it gone from %d of %d nodes", lease.ErrLost, name, gone, len(q.nodes)),
			failed(rs))
	case held < q.quorum:
		return 0, sentinel.Join(fmt.Errorf("redlock: reissue %q: held on %d of %d nodes, %d needed; the token is unchanged",
			name, held, len(q.nodes), q.quorum), lifetime.Ended(ctx), failed(rs))
	}
	// Every node that answered with less than seq takes seq: its counter,
	// and its lock's Seq where it holds the lease.
	have := 0
	var lag []node
	for i, r := range rs {
		switch {
		case r.err != nil:
		case r.val == seq:
			have++
		default:
			lag = append(lag, q.nodes[i])
		}
	}
	out := fanout(ctx, lag, q.set.nodeTimeout, adoptOp(b.keys, b.tok.Holder, seq, q.cfg.Counter()), nil)
	for _, r := range out {
		if r.err == nil {
			have++
		}
	}
	if have < q.quorum {
		return 0, sentinel.Join(fmt.Errorf("redlock: reissue %q: Seq %d reached %d of %d nodes, %d needed; the token is unchanged",
			name, seq, have, len(q.nodes), q.quorum), lifetime.Ended(ctx), failed(out))
	}
	return seq, nil
}

func releaseOp(k protocol.Keys, holder string) func(context.Context, node, family.Conn) (bool, error) {
	return func(ctx context.Context, n node, c family.Conn) (bool, error) {
		return protocol.Unlock(ctx, c, k, protocol.Release{Holder: holder, PubSub: n.notify.PubSub()})
	}
}

func adoptOp(k protocol.Keys, holder string, seq uint64, counter protocol.Counter) func(context.Context, node, family.Conn) (uint64, error) {
	return func(ctx context.Context, n node, c family.Conn) (uint64, error) {
		return protocol.Adopt(ctx, c, k, holder, seq, counter)
	}
}

var _ family.Strategy = (*quorum)(nil)
