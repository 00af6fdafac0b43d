package quorum

import (
	"context"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/transport"
)

// A semaphore's permit is a lease on one of its slots (protocol.Semaphore):
// an Attempt with sem set tries for any slot (tryPermit, through tryOne),
// a handoff names the slot it gave (handedOff), the grant's backend works
// on that slot's keys, and a waiter that gives up leaves the semaphore's
// queue (leaveOp).

// tryPermit is one try's call for a permit of the semaphore; the slot it
// got goes in a.slot.
func (a *Attempt) tryPermit(ctx context.Context, c transport.Conn, t protocol.Try) (protocol.TryResult, error) {
	r, err := protocol.AcquirePermit(ctx, c, *a.sem, t)
	if r.Got() {
		a.slot = r.Slot
	}
	return r.TryResult, err
}
