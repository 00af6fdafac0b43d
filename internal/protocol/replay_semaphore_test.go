package protocol_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/protocol/model"
)

// TestModelReplaySemaphore ties the model's semaphore (model.Config's
// Permits) to the real scripts as TestModelReplay does for the lock: it
// replays the model's seeded walks on the Redis of TestMain, one script
// call per server step (AcquirePermit with the client's N, Unlock on
// Semaphore.Slot(i), LeavePermit, Refresh on the slot for a handoff's
// refresh and a claimed lease's confirm), and compares after every step
// each slot's lock (holder, token, ttl kept or set) and counter, the
// permits key (its N, and its ttl: none, set by the try that wrote it, or
// kept; the replay deletes it when the model's lapses, as it does the
// other keys), the queue and its tickets, each reply (outcome, token,
// slot, PTTL in ticks), each release's and leave's result, and each
// message in order: a handoff (holder, token, attempt, slot: a try that
// takes a slot publishes one for every other free slot it hands on), or
// the plain wake-up of a release or leave that found no permits key; and
// what InspectSemaphore reads of them. Tokens are mapped slot by slot:
// each slot has its own counter. A walk on which the model breaks a
// property is compared up to that step, and reported; the others go on.
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
		// No clock floor, and counters and the permits key kept forever:
		// each slot's tokens step by one.
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

// TestSemaphoreHolderHasOneSlot runs, on the real scripts, the shortest
// schedules in which the model (TestSemaphoreOneSlotPerHolder) finds one
// holder id with two slots under mixed N: a waiter c of N=1 is handed
// slot 1 while the permits key says 2; the key goes below 2 before c's
// next try runs (another client of N=1 writes 1, or the key lapses); that
// try scans slot 0 alone, finds it free with nobody queued, and takes it.
// Slot 1 is then lost to the others until its claim window runs out: the
// cost docs/design.md states for mixed N, which this pins.
func TestSemaphoreHolderHasOneSlot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lower func(t *testing.T, one protocol.Semaphore) // the permits key goes from 2 to below 2
	}{
		{"another client's smaller N", func(t *testing.T, one protocol.Semaphore) {
			// d, of N=1, tries without queueing: slot 0 is a's; the try
			// writes 1.
			require.Equal(t, protocol.Held, permitTry(t, one, "d", 0).Outcome)
		}},
		{"the permits key lapsed", func(t *testing.T, one protocol.Semaphore) {
			// Its counter ttl ran out (deleted, as the replay expires keys).
			require.NoError(t, rdb.Del(t.Context(), one.Permits).Err())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := t.Name() + "/" + uuid.NewString()[:8]
			two := protocol.SemaphoreFor("fencelock-protocol-test:", name, 2)
			one := protocol.SemaphoreFor("fencelock-protocol-test:", name, 1)
			require.Equal(t, 0, permitTry(t, two, "a", 0).Slot)
			require.Equal(t, 1, permitTry(t, two, "b", 0).Slot)
			c := protocol.NewAttempt()
			require.Equal(t, protocol.Held, permitTry(t, one, "c", c).Outcome)       // queued; the key says 1
			require.Equal(t, protocol.Reacquired, permitTry(t, two, "b", 0).Outcome) // the key says 2
			require.True(t, release(t, two, 1, "b"))                                 // slot 1 goes to c
			require.Equal(t, "c", holderOf(t, two.Slot(1)))
			tc.lower(t, one)
			require.True(t, release(t, two, 0, "a")) // nobody queued: slot 0 is free
			r := permitTry(t, one, "c", c)           // c's try, sent before it read the handoff
			st, err := protocol.InspectSemaphore(t.Context(), rdb, two)
			require.NoError(t, err)
			// The documented cost of mixed N: c takes slot 0, and slot 1,
			// handed to it and never confirmed, frees with its claim
			// window, not c's ttl.
			require.Equal(t, protocol.Acquired, r.Outcome)
			require.Equal(t, 0, r.Slot)
			require.Equal(t, "c", st.Slots[1].Holder)
			require.LessOrEqual(t, st.Slots[1].PTTL, protocol.ClaimTTL(10*time.Second))
		})
	}
}
