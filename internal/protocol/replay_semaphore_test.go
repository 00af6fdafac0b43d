package protocol_test

import (
	"testing"

	"github.com/fencelock/fencelock/internal/protocol/model"
)

// TestModelReplaySemaphore ties the model's semaphore (model.Config's
// Permits) to the real scripts as TestModelReplay does for the lock: it
// replays the model's seeded walks on the Redis of TestMain, one script
// call per server step (AcquirePermit with the client's N, Unlock on
// Semaphore.Slot(i), LeavePermit, Refresh on the slot for a handoff's
// refresh and a claimed lease's confirm), and compares after every step
// each slot's lock (holder, token, ttl kept or set) and counter, the
// permits key, the queue and its tickets, each reply (outcome, token,
// slot, PTTL in ticks), each release's and leave's result, and each
// handoff message in order (holder, token, attempt, slot: a try that
// takes a slot publishes one for every other free slot it hands on), and
// what InspectSemaphore reads of them. Tokens are mapped slot by slot:
// each slot has its own counter.
func TestModelReplaySemaphore(t *testing.T) {
	t.Parallel()
	deep := model.Config{Variant: model.Fixed, Permits: 3, Clients: 4, Acquisitions: 3, MaxTries: 4, TTL: 4, TicketTTL: 6,
		Poll: 2, Horizon: 30, Losses: 2, Duplicates: 2, Leaves: 2, Deaths: 1, Restarts: 1, ClockFloor: true, CounterTTL: 5}
	claim := deep
	claim.TTL, claim.TicketTTL, claim.Poll = 8, 3, 1
	shrink := deep
	shrink.NewPermits, shrink.NewClients, shrink.Restarts = 2, 2, 0
	for _, tc := range []struct {
		name  string
		cfg   model.Config
		walks int
	}{
		// Three permits and every kind of fault, counter ttl, clock floor.
		{"three permits", deep, 100},
		// The ttl above the ticket lifetime: handoffs set a slot for the
		// claim window, which the lease confirms to its ttl.
		{"claim", claim, 100},
		// No clock floor and counters kept forever: each slot's tokens
		// step by one.
		{"counter steps", model.Config{Variant: model.Fixed, Permits: 2, Clients: 3, Acquisitions: 3, TTL: 3, TicketTTL: 4,
			Horizon: 30, Leaves: 2, Deaths: 1, Duplicates: 1}, 100},
		// Two of four clients ask for two permits, the others for three:
		// the permits key changes, and a slot released past it is deleted.
		{"shrink", shrink, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			replayWalks(t, tc.cfg, tc.walks)
		})
	}
}
