package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
)

// Info is a lock's state over the nodes, read at about one instant. Its
// lease.Info is the majority's view: Holder is the holder id found on a
// majority of the nodes ("" when no holder has one: the lock is free or
// split); Token is that holder's token, with the highest Seq among the
// nodes where it holds the lock; TTL is how long it keeps a majority (the
// remaining ttl of its quorum-th longest key); LastSeq is the highest
// counter among the nodes that answered.
type Info struct {
	lease.Info
	// Nodes is each node's own view, in the order given to [New]; a node
	// that failed has Err set.
	Nodes []NodeInfo
}

// NodeInfo is one node's state of a lock.
type NodeInfo struct {
	Addr string
	lease.Info
	Err error // a *NodeError when the node did not answer
}

// Inspect reads lock name's holder, remaining ttl and counter on every node
// at once (one atomic script per node, each bounded by the node timeout).
// It returns an error only for bad input or when fewer than a majority of
// the nodes answered; the failed nodes' errors are in Info.Nodes either way.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if c == nil || len(c.nodes) == 0 || ctx == nil {
		return Info{}, invalid("nil client or context")
	}
	if err := c.check(name, time.Second); err != nil {
		return Info{}, err
	}
	k := c.keys(name)
	rs := fanout(ctx, c.nodes, c.cfg.NodeTimeout, func(ctx context.Context, n node) (protocol.State, error) {
		return protocol.Inspect(ctx, n.rdb, k)
	}, nil)

	info := Info{Info: lease.Info{Name: name}, Nodes: make([]NodeInfo, len(rs))}
	answered := 0
	ttls := map[string][]time.Duration{}
	for i, r := range rs {
		ni := NodeInfo{Addr: c.nodes[i].addr, Err: r.err}
		if r.err == nil {
			answered++
			s := r.val
			ni.Info = lease.Info{Name: name, Holder: s.Holder, TTL: s.PTTL, LastSeq: s.LastSeq}
			if s.Holder != "" {
				ni.Token = fence.Token{Key: name, Seq: s.Seq, Holder: s.Holder}
				ttls[s.Holder] = append(ttls[s.Holder], s.PTTL)
			}
			info.LastSeq = max(info.LastSeq, s.LastSeq)
		}
		info.Nodes[i] = ni
	}
	for h, ds := range ttls {
		if len(ds) < c.quorum {
			continue
		}
		slices.Sort(ds)
		info.Holder, info.TTL = h, ds[len(ds)-c.quorum]
		info.Token = fence.Token{Key: name, Holder: h}
		for _, n := range info.Nodes {
			if n.Err == nil && n.Holder == h {
				info.Token.Seq = max(info.Token.Seq, n.Token.Seq)
			}
		}
	}
	if answered < c.quorum {
		return info, errors.Join(fmt.Errorf("redlock: inspect %q: %d of %d nodes answered, %d needed",
			name, answered, len(c.nodes), c.quorum), failed(rs))
	}
	return info, nil
}
