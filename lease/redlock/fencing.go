package redlock

import (
	"context"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/quorum"
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
func writeBack(ctx context.Context, a *quorum.Attempt, rs []quorum.Reply[protocol.TryResult], seq uint64) error {
	s := a.Strategy()
	have := 0
	var lag []*quorum.Node
	for i, r := range rs {
		switch {
		case r.Err != nil:
		case r.Val.Got() && r.Val.Seq == seq:
			have++
		default: // granted with another Seq, or held by another holder
			lag = append(lag, s.Nodes()[i])
		}
	}
	var errs error
	if len(lag) > 0 {
		out := a.Adopt(ctx, lag, seq)
		for _, r := range out {
			if r.Err == nil {
				have++
			}
		}
		errs = quorum.Failed(out)
	}
	if have < s.Quorum() {
		return quorum.Joinf(errs, "%w: %q: quorum fencing: Seq %d reached %d of %d nodes, %d needed",
			lease.ErrNotAcquired, a.Name(), seq, have, len(rs), s.Quorum())
	}
	return nil
}
