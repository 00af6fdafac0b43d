package redlock

import (
	"context"
	"slices"
	"time"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/protocol"
)

// Inspect reads the lock on every node at once (one atomic script per node,
// each bounded by the node timeout) and makes the majority's view of it.
func (q *quorum) Inspect(ctx context.Context, name string) (family.State, error) {
	k := q.cfg.Keys(name)
	rs := fanout(ctx, q.nodes, q.set.nodeTimeout, func(ctx context.Context, n node, c family.Conn) (protocol.State, error) {
		return protocol.Inspect(ctx, c, k)
	}, nil)

	st := family.State{Nodes: make([]family.NodeState, len(rs))}
	answered := 0
	ttls := map[string][]time.Duration{}
	for i, r := range rs {
		ns := family.NodeState{Addr: q.nodes[i].addr, Err: r.err}
		if r.err == nil {
			answered++
			s := r.val
			ns.State = family.State{Holder: s.Holder, Seq: s.Seq, TTL: s.PTTL, LastSeq: s.LastSeq}
			if s.Holder != "" {
				ttls[s.Holder] = append(ttls[s.Holder], s.PTTL)
			}
			st.LastSeq = max(st.LastSeq, s.LastSeq)
		}
		st.Nodes[i] = ns
	}
	for h, ds := range ttls {
		if len(ds) < q.quorum {
			continue
		}
		slices.Sort(ds)
		st.Holder, st.TTL = h, ds[len(ds)-q.quorum]
		for _, n := range st.Nodes {
			if n.Err == nil && n.State.Holder == h {
				st.Seq = max(st.Seq, n.State.Seq)
			}
		}
	}
	if answered < q.quorum {
		return st, joinf(failed(rs), "%d of %d nodes answered, %d needed", answered, len(q.nodes), q.quorum)
	}
	return st, nil
}
