package redlock

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

// writeBack is the second half of quorum fencing: it makes seq, the highest
// counter among the nodes that granted the lock, the floor of the counter on
// a majority before the lease is handed out.
//
// Why that is enough: the next acquisition that does not overlap this one is
// granted by a majority, which shares a node with any majority whose
// counters are at least seq. If that node has not restarted since, its INCR
// yields more than seq, and the maximum over the new majority does too. So
// tokens increase as long as the nodes that took the write-back and have not
// restarted empty still form a majority; writing back to every node that
// answered, not just a bare majority, is what lets any minority restart.
//
// Nodes that granted the lock with seq itself already have it and are not
// written again; in the steady state (all counters equal) there is nothing
// to write and no second round trip. Nodes that did not answer the acquire
// are skipped: another round trip to them would most likely time out too.
func (q *quorum) writeBack(ctx context.Context, name string, k protocol.Keys, holder string, rs []reply[protocol.TryResult], seq uint64) error {
	have := 0
	var lag []node
	for i, r := range rs {
		switch {
		case r.err != nil:
		case r.val.Got() && r.val.Seq == seq:
			have++
		default: // granted with another Seq, or held by another holder
			lag = append(lag, q.nodes[i])
		}
	}
	var errs error
	if len(lag) > 0 {
		out := fanout(ctx, lag, q.set.nodeTimeout, adoptOp(k, holder, seq, q.cfg.Counter()), nil)
		for _, r := range out {
			if r.err == nil {
				have++
			}
		}
		errs = failed(out)
	}
	if have < q.quorum {
		return sentinel.Join(fmt.Errorf("%w: %q: quorum fencing: Seq %d reached %d of %d nodes, %d needed",
			lease.ErrNotAcquired, name, seq, have, len(q.nodes), q.quorum), errs)
	}
	return nil
}
