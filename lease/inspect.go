package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
)

// Info is a lock's state at one instant. On a quorum of nodes it is the
// majority's view: Holder is the holder id found on a majority ("" when
// none has one), Token has the highest Seq among the nodes where it holds,
// TTL is how long it keeps a majority, LastSeq the highest counter among
// the nodes that answered, and Nodes has each node's own view.
type Info struct {
	Name string
	// Holder is the current holder id, "" when the lock is free.
	Holder string
	// Token is the current holder's token; the zero Token when free.
	Token fence.Token
	// TTL is the lock's remaining time to live in Redis; 0 when free,
	// NoTTL when its key has no ttl (not set by fencelock: it never expires).
	TTL time.Duration
	// LastSeq is the counter: the last Seq issued for the name (0 if none,
	// or if the counter was lost).
	LastSeq uint64
	// Queued is how many fair waiters have a place in the queue (at most
	// 1,000: a waiter that finds the queue full waits without a place).
	Queued int
	// QueueHead is the holder id of the queue's first waiter, "" when
	// none: the next holder, unless its ticket expired.
	QueueHead string
	// Nodes is, on a quorum, each node's view in the order the nodes were
	// given; a node that did not answer has Err set. Nil on one Redis.
	Nodes []NodeInfo
}

// NodeInfo is one node's view of a lock.
type NodeInfo struct {
	Addr string
	Info
	Err error
}

// NoTTL is Info.TTL for a lock whose key has no ttl: the longest
// time.Duration.
const NoTTL = protocol.NoTTL

// Inspect reads lock name's holder, remaining ttl and counter: one atomic
// round trip (per node). On a quorum it fails only when fewer than a
// majority answered; the failed nodes are in Info.Nodes either way.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if err := c.usable(ctx, name); err != nil {
		return Info{}, err
	}
	s, err := c.s.Inspect(ctx, name)
	info := infoOf(name, s.Holder, s.Seq, s.TTL, s.LastSeq, s.Queued)
	info.QueueHead = s.Head
	for _, n := range s.Nodes {
		ni := NodeInfo{Addr: n.Addr, Err: n.Err}
		ni.Info = infoOf(name, n.State.Holder, n.State.Seq, n.State.TTL, n.State.LastSeq, n.State.Queued)
		info.Nodes = append(info.Nodes, ni)
	}
	if err != nil {
		return info, fmt.Errorf("lease: inspect %q: %w", name, err)
	}
	return info, nil
}

func infoOf(name, holder string, seq uint64, ttl time.Duration, last uint64, queued int) Info {
	info := Info{Name: name, Holder: holder, TTL: ttl, LastSeq: last, Queued: queued}
	if holder != "" {
		info.Token = fence.Token{Key: name, Seq: seq, Holder: holder}
	}
	return info
}

// Advance lifts lock name's counter (on a majority of the nodes) to at
// least floor, an atomic max, and returns a counter value that the next
// token is greater than. Use it to heal after the counter went backwards:
// a verifier's stale-token error carries the highest Seq the storage saw.
func (c *Client) Advance(ctx context.Context, name string, floor uint64) (uint64, error) {
	if err := c.usable(ctx, name); err != nil {
		return 0, err
	}
	if floor >= fence.MaxSeq {
		return 0, invalid("floor %d leaves no room below 2^53-1", floor)
	}
	n, err := c.s.Advance(ctx, name, floor)
	if err != nil {
		return 0, fmt.Errorf("lease: advance %q to %d: %w", name, floor, err)
	}
	return n, nil
}

// usable checks what every call of a client needs before any I/O.
func (c *Client) usable(ctx context.Context, name string) error {
	switch {
	case c == nil || c.s == nil:
		return invalid("nil client")
	case ctx == nil:
		return invalid("nil context")
	}
	if err := fence.ValidateKey(name); err != nil {
		return invalid("%w", err)
	}
	return nil
}
