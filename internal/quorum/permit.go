package quorum

import (
	"context"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/transport"
)

// A semaphore's permit is a lease on one of its slots (protocol.Semaphore):
// an Attempt with sem set tries for any slot (tryPermit), a handoff names
// the slot it gave (handedOff), the grant's backend works on that slot's
// keys, and a waiter that gives up leaves the semaphore's queue (leaveOp).

// tryPermit is a try for a permit of the semaphore, on one Redis, as
// tryOne; the slot it got goes in a.slot.
func (a *Attempt) tryPermit(ctx context.Context, t protocol.Try) Reply[protocol.TryResult] {
	n := a.s.cfg.Nodes[0]
	res, sent, err := transport.Watch(ctx, n.Probe, 0, func(ctx context.Context) (protocol.TryResult, transport.Sent, error) {
		return transport.Send(ctx, n.Tr, func(ctx context.Context, c transport.Conn) (protocol.TryResult, error) {
			r, err := protocol.AcquirePermit(ctx, c, *a.sem, t, n.Caps().PubSub)
			if r.Got() {
				a.slot = r.Slot
			}
			return r.TryResult, err
		})
	})
	return Reply[protocol.TryResult]{Val: res, Err: err, Sent: sent, In: true}
}
