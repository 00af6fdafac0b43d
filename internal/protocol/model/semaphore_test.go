package model

import (
	"strings"
	"testing"
)

// TestSemaphoreOfOneIsTheLock: a semaphore of one permit is the fair lock
// (sem_acquire.lua on one slot is acquire_fair.lua, and a slot's release
// is release_fair.lua): the same configuration explores as many states
// either way, and keeps every property.
func TestSemaphoreOfOneIsTheLock(t *testing.T) {
	t.Parallel()
	lock := Config{Variant: Fixed, Horizon: 4}
	sem := lock
	sem.Permits = 1
	a, b := check(t, lock), check(t, sem)
	if a.Property != "" || b.Property != "" {
		t.Fatalf("lock: %q %s; semaphore: %q %s", a.Property, a.Violation, b.Property, b.Violation)
	}
	if a.States != b.States || a.Transitions != b.Transitions {
		t.Errorf("the lock explores %d states (%d transitions), the semaphore of one %d (%d)",
			a.States, a.Transitions, b.States, b.Transitions)
	}
}

// TestSemaphoreHolds: the semaphore keeps (a), (b) and (c) in every state:
// at most N windows at once and never two on one slot, each slot's tokens
// growing, no slot handed to a dead waiter past the claim, and no slot
// waiting for a live head past the claim window plus the poll, with each
// kind of fault in at least one configuration, and a change of N.
func TestSemaphoreHolds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		need []string
	}{
		// The ttl above the ticket lifetime: handoffs set a slot for the
		// claim window, which a waiter that died never confirms.
		{"two permits, claim, death, duplicates", Config{Permits: 2, TTL: 4, TicketTTL: 2, Horizon: 4, Deaths: 1, Duplicates: 1},
			[]string{"claim lease", "confirm", "confirmed", "handoff to the dead"}},
		{"two permits, drift, leave, loss", Config{Permits: 2, TTL: 3, Drift: 1, Horizon: 4, MaxTries: 2, Leaves: 1, Losses: 1},
			nil},
		{"three permits, four clients", Config{Permits: 3, Clients: 4, Horizon: 2, MaxTries: 2}, nil},
		// The permits key lapses a tick after a try wrote it: a release
		// then deletes its slot and wakes the waiters, who try again.
		{"two permits, restart, counter ttl", Config{Permits: 2, Horizon: 3, MaxTries: 2, Restarts: 1, CounterTTL: 1},
			[]string{"wake-up", "wake-up read"}},
		// Two clients ask for two permits, one for one: the permits key
		// goes back and forth, slot 1 is deleted on release while it says
		// one, and the client of one finds slot 1 when it was handed it.
		{"shrink from two to one", Config{Permits: 2, NewPermits: 1, NewClients: 1, Horizon: 4, MaxTries: 2},
			[]string{"surplus deleted", "slot past N"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Variant = Fixed
			r := check(t, tc.cfg)
			if r.Property != "" {
				t.Fatalf("%s: %s\n%s", r.Property, r.Violation, r.TraceString())
			}
			if r.States < 10_000 {
				t.Errorf("only %d states explored: the search is vacuous", r.States)
			}
			t.Logf("events: %v", r.Events)
			need := append([]string{"handoff", "handoff lease", "reserved handoff", "handoff refresh", "refresh lease",
				"refresh failed", "try lease", "dead on arrival"}, tc.need...)
			for _, e := range need {
				if r.Events[e] == 0 {
					t.Errorf("no %q step taken: that path went unchecked", e)
				}
			}
		})
	}
}

// TestSemaphoreOneSlotPerHolder: the two schedules of mixed N where a
// holder ends up with two slots: a waiter of N=1 is handed slot 1 while
// the permits key says 2; when the key goes below 2 before the waiter's
// next try runs (another client of N=1 writes 1, or the key lapses), that
// try scans slot 0 alone (own_slot looks past N only up to the key's N),
// and takes it if it is free. The slot it does not use is never a lease
// and frees with its claim window (docs/design.md, "Mixed N"): the checker
// skips the one-slot rule under mixed N, and every lease rule still holds.
// Package protocol's TestSemaphoreHolderHasOneSlot runs the schedules on
// the scripts.
func TestSemaphoreOneSlotPerHolder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"another client's smaller N", Config{Permits: 2, NewPermits: 1, NewClients: 2, Horizon: 4, MaxTries: 2}},
		{"the permits key lapses", Config{Permits: 2, NewPermits: 1, NewClients: 1, Horizon: 4, MaxTries: 2, CounterTTL: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Variant = Fixed
			if r := check(t, tc.cfg); r.Property != "" {
				t.Fatalf("%s: %s\n%s", r.Property, r.Violation, r.TraceString())
			}
		})
	}
}

// TestSemaphoreMutantsFail: the checker catches each deliberate break of
// the semaphore, with one of the shortest schedules that show it.
func TestSemaphoreMutantsFail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want Property
		what string
	}{
		// A handoff takes its token from slot 0's counter, the
		// semaphore's first, not the slot's own: a later try on the slot
		// is given a token its counter gave before.
		{"handoff with the first slot's counter", Config{Permits: 2, SharedCounter: true, Horizon: 3}, Order, "not above"},
		// A release hands on a slot past the N the last try wrote: the
		// semaphore shrank, and still as many hold it as before.
		{"surplus slot handed on, two to one", Config{Permits: 2, NewPermits: 1, NewClients: 1, HandSurplus: true, Horizon: 2},
			Exclusion, "after the semaphore shrank"},
		{"surplus slot handed on, three to two", Config{Permits: 3, NewPermits: 2, NewClients: 1, Clients: 4, MaxTries: 2,
			HandSurplus: true, Horizon: 2}, Exclusion, "after the semaphore shrank"},
		// The no-strand bound one tick short of the claim window plus the
		// poll: a slot handed to a waiter killed before it read the
		// message frees when the claim runs out, and the live waiter
		// behind takes it at its next poll, which is then due.
		{"free bound short by one", Config{Permits: 1, Deaths: 1, Horizon: 5, FreeBound: 2}, Liveness, "still not taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Variant = Fixed
			r := check(t, tc.cfg)
			if r.Property != tc.want || !strings.Contains(r.Violation, tc.what) {
				t.Fatalf("want a %s violation (%q), got %q %s", tc.want, tc.what, r.Property, r.Violation)
			}
			t.Logf("%s\n%s", r.Violation, r.TraceString())
		})
	}
}

// semDeep is a semaphore configuration beyond exhaustive reach, for walks.
var semDeep = Config{Variant: Fixed, Permits: 3, Clients: 4, Acquisitions: 3, MaxTries: 4, TTL: 4, TicketTTL: 6, Poll: 2,
	Horizon: 30, Losses: 2, Duplicates: 2, Leaves: 2, Deaths: 1, Restarts: 1, ClockFloor: true, CounterTTL: 5}

// TestSemaphoreWalks: seeded walks over deep semaphore configurations find
// nothing: three permits and every kind of fault, the claim (the ttl above
// the ticket lifetime), and three permits shrinking to two.
func TestSemaphoreWalks(t *testing.T) {
	t.Parallel()
	claim := semDeep
	claim.TTL, claim.TicketTTL, claim.Poll = 8, 3, 1
	shrink := semDeep
	shrink.NewPermits, shrink.NewClients, shrink.Restarts = 2, 2, 0
	for _, tc := range []struct {
		name  string
		cfg   Config
		walks int
		need  []string
	}{
		{"three permits", semDeep, 5_000, []string{"drain handoff", "handoff to the dead", "wake-up", "wake-up read"}},
		{"claim", claim, 5_000, []string{"claim lease", "confirmed", "confirm failed"}},
		{"shrink", shrink, 5_000, []string{"surplus deleted", "slot past N", "wake-up"}},
	} {
		r, seed, err := Walks(tc.cfg, 1, tc.walks, 400)
		if err != nil {
			t.Fatal(err)
		}
		if r.Property != "" {
			t.Fatalf("%s, seed %d: %s: %s\n%s", tc.name, seed, r.Property, r.Violation, r.TraceString())
		}
		t.Logf("%s: %d steps, longest walk %d, events %v", tc.name, r.States, r.Depth, r.Events)
		for _, e := range tc.need {
			if r.Events[e] == 0 {
				t.Errorf("%s: no %q step taken", tc.name, e)
			}
		}
	}
}
