package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// check runs Check and logs its size and time.
func check(t *testing.T, cfg Config) Result {
	t.Helper()
	start := time.Now()
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d states, %d transitions, depth %d, in %v", r.States, r.Transitions, r.Depth, time.Since(start).Round(time.Millisecond))
	return r
}

// TestOldFindsTwoHolders: the old protocol lets a waiter take a handoff
// whose lock expired, counting its lease from a try sent after it.
func TestOldFindsTwoHolders(t *testing.T) {
	t.Parallel()
	r := check(t, Config{Variant: Old, Horizon: 3})
	if r.Property != Exclusion {
		t.Fatalf("want an exclusion violation, got %q %s", r.Property, r.Violation)
	}
	t.Logf("%s\n%s", r.Violation, r.TraceString())
	if len(r.Trace) > 16 {
		t.Errorf("trace of %d steps; breadth first should find one of 15", len(r.Trace))
	}
}

// strandCfg is a waiter killed while queued, its ttl twice the ticket's
// lifetime (the claim window).
var strandCfg = Config{Clients: 2, TTL: 4, TicketTTL: 2, Deaths: 1, Horizon: 5}

// TestOldHandoffStrands: the handoff of main before the claim (the lock
// set for the waiter's whole ttl) lets a waiter that died keep the lock
// for that ttl, past the strand bound.
func TestOldHandoffStrands(t *testing.T) {
	t.Parallel()
	cfg := strandCfg
	cfg.Variant, cfg.OldHandoff = Fixed, true
	r := check(t, cfg)
	if r.Property != Liveness || !strings.Contains(r.Violation, "no live Acquire can take it") {
		t.Fatalf("want the lock handed to a dead waiter held past the bound, got %q %s", r.Property, r.Violation)
	}
	t.Logf("%s\n%s", r.Violation, r.TraceString())
}

// TestClaimFreesStrandedLock: with the claim, the same configuration keeps
// every property, and the lock was handed to a dead waiter on the way.
func TestClaimFreesStrandedLock(t *testing.T) {
	t.Parallel()
	cfg := strandCfg
	cfg.Variant = Fixed
	r := check(t, cfg)
	if r.Property != "" {
		t.Fatalf("%s: %s\n%s", r.Property, r.Violation, r.TraceString())
	}
	t.Logf("events: %v", r.Events)
	for _, e := range []string{"handoff to the dead", "claim lease", "confirm", "confirmed"} {
		if r.Events[e] == 0 {
			t.Errorf("no %q step taken: that path went unchecked", e)
		}
	}
}

// TestFixedHolds: the fixed protocol keeps (a), (b) and (c) in every
// state, with each kind of fault in at least one configuration.
func TestFixedHolds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"lost and duplicated messages", Config{Horizon: 5, Losses: 1, Duplicates: 1}},
		{"leave and death", Config{Horizon: 5, Leaves: 1, Deaths: 1}},
		{"drift, longer ttl", Config{Horizon: 6, TTL: 3, Drift: 1, Duplicates: 1}},
		{"restart and heal, clock floor", Config{Horizon: 4, Restarts: 1, Advances: 1, ClockFloor: true, CounterTTL: 2}},
		{"two restarts, counter ttl", Config{Horizon: 4, Restarts: 2, CounterTTL: 1}},
		{"advance above the clock, counter ttl", Config{Horizon: 4, Advances: 1, AdvanceAhead: 2, CounterTTL: 1}},
		// Two clients, two Acquires each under one holder id (WithHolder):
		// handoff messages of the first Acquire reach the second.
		{"same holder, two acquires", Config{Clients: 2, Acquisitions: 2, ReuseHolder: true, Horizon: 4, Leaves: 1}},
		// The ttl above the ticket's lifetime: a handoff sets the lock for
		// the claim window only, and the lease confirms it later.
		{"claim, death, duplicates", Config{TTL: 4, TicketTTL: 2, Horizon: 5, Deaths: 1, Duplicates: 1}},
		{"claim, drift, leave, loss", Config{TTL: 5, TicketTTL: 3, Drift: 1, Horizon: 5, Leaves: 1, Losses: 1}},
		{"claim, restart", Config{TTL: 4, TicketTTL: 2, Horizon: 4, Restarts: 1, ClockFloor: true}},
		{"claim, same holder", Config{Clients: 2, Acquisitions: 2, ReuseHolder: true, TTL: 4, TicketTTL: 2, Horizon: 4, Leaves: 1}},
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
			need := []string{"handoff", "handoff lease", "handoff refresh", "refresh lease", "refresh failed", "try lease", "dead on arrival"}
			if tc.cfg.ReuseHolder {
				need = append(need, "earlier acquire's handoff")
			}
			if tc.cfg.TTL > tc.cfg.TicketTTL && tc.cfg.TicketTTL > 0 {
				need = append(need, "claim lease", "confirm", "confirmed")
				if tc.cfg.Restarts > 0 { // only a lost key fails a confirm sent in time
					need = append(need, "confirm failed")
				}
			}
			for _, e := range need {
				if r.Events[e] == 0 {
					t.Errorf("no %q step taken: that path went unchecked", e)
				}
			}
		})
	}
}

// TestMutantsFail: the checker catches each deliberate break of Fixed,
// so a pass of TestFixedHolds means something.
func TestMutantsFail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want Property
	}{
		// refresh.lua compares the holder only: a late handoff message
		// renews the lock its holder got again with a newer token.
		{"refresh by holder", Config{RefreshByHolder: true, Horizon: 3}, Order},
		// A message from an earlier Acquire of the same holder id, read
		// with that Acquire's send time.
		{"no attempt check", Config{SkipAttemptCheck: true, ReuseHolder: true, Clients: 2, Acquisitions: 2, Horizon: 2}, Exclusion},
		// A waiter killed in the queue keeps the lock handed to it for a
		// ttl: a bound below that must fail.
		{"liveness bound too short", Config{Deaths: 1, Horizon: 4, LivenessBound: 1}, Liveness},
		// A claimed handoff counted with the whole ttl: the lease outlives
		// the key, which another waiter then takes.
		{"claim counted with the ttl", Config{ClaimFullDeadline: true, TTL: 4, TicketTTL: 2, Horizon: 4}, Exclusion},
		// The old counter rule: a lost counter without ttl starts at 1.
		{"old counter after restart", Config{OldCounter: true, Restarts: 1, Horizon: 2}, Order},
		// The old Advance kept the counter's ttl: when it lifted the
		// counter above the clock, the counter expires first.
		{"old counter, advance above the clock", Config{OldCounter: true, Advances: 1, AdvanceAhead: 2, CounterTTL: 1, Horizon: 3}, Order},
		// Advance above the clock, then a restart: the clock floor cannot
		// reach the lost floor (a limit of any rule without persistence).
		{"advance above the clock, restart", Config{Advances: 1, AdvanceAhead: 2, Restarts: 1, Horizon: 2}, Order},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Variant = Fixed
			r := check(t, tc.cfg)
			if r.Property != tc.want {
				t.Fatalf("want a %s violation, got %q %s", tc.want, r.Property, r.Violation)
			}
			t.Logf("%s\n%s", r.Violation, r.TraceString())
		})
	}
}

// deep is a configuration beyond exhaustive reach, for walks.
var deep = Config{Clients: 4, Acquisitions: 3, MaxTries: 4, TTL: 4, TicketTTL: 6, Poll: 2, Horizon: 30,
	Losses: 2, Duplicates: 2, Leaves: 2, Deaths: 1, Restarts: 1, Advances: 1, ClockFloor: true, CounterTTL: 5}

// TestWalkReplays: a walk is a function of its seed.
func TestWalkReplays(t *testing.T) {
	t.Parallel()
	cfg := deep
	cfg.Variant = Fixed
	a, err := Walk(cfg, 42, 400)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Walk(cfg, 42, 400)
	c, _ := Walk(cfg, 43, 400)
	if len(a.Trace) < 50 {
		t.Fatalf("walk of %d steps only", len(a.Trace))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different walks")
	}
	if reflect.DeepEqual(a.Trace, c.Trace) {
		t.Fatal("different seeds, same walk")
	}

	// A failing seed found among many replays to the same violation.
	cfg.Variant = Old
	r, seed, err := Walks(cfg, 1, 10_000, 400)
	if err != nil {
		t.Fatal(err)
	}
	if r.Property == "" {
		t.Fatalf("no violation of Old in %d walk steps", r.States)
	}
	again, _ := Walk(cfg, seed, 400)
	if again.Violation != r.Violation || !reflect.DeepEqual(again.Trace, r.Trace) {
		t.Fatalf("seed %d does not replay: %q vs %q", seed, again.Violation, r.Violation)
	}
	t.Logf("Old: seed %d breaks %s in %d steps: %s", seed, r.Property, len(r.Trace), r.Violation)
}

// TestFixedWalks: seeded walks over the deep configuration find nothing,
// nor do they with a ttl above the ticket lifetime (claimed handoffs).
func TestFixedWalks(t *testing.T) {
	t.Parallel()
	claim := deep
	claim.TTL, claim.TicketTTL, claim.Poll = 8, 3, 1
	for _, tc := range []struct {
		cfg   Config
		walks int
	}{{deep, 20_000}, {claim, 10_000}} {
		cfg := tc.cfg
		cfg.Variant = Fixed
		r, seed, err := Walks(cfg, 1, tc.walks, 400)
		if err != nil {
			t.Fatal(err)
		}
		if r.Property != "" {
			t.Fatalf("ttl %d, seed %d: %s: %s\n%s", cfg.TTL, seed, r.Property, r.Violation, r.TraceString())
		}
		t.Logf("ttl %d: %d steps, longest walk %d, events %v", cfg.TTL, r.States, r.Depth, r.Events)
	}
}

// TestEncodeRoundTrip: the search keeps states as bytes; decoding must
// give back the very state.
func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	shrink := semDeep
	shrink.NewPermits, shrink.NewClients = 2, 2
	for _, c := range []Config{deep, semDeep, shrink} {
		cfg, _ := c.norm()
		m := &machine{cfg: cfg}
		for seed := uint64(0); seed < 50; seed++ {
			path, _ := m.walk(seed, 400)
			s := m.initial()
			for _, a := range path {
				s, _ = m.apply(s, a)
				b := m.encode(&s, nil)
				if d := m.decode(b); d != s {
					t.Fatalf("permits %d, seed %d: decode(encode(s)) != s\n%+v\n%+v", cfg.Permits, seed, s, d)
				}
			}
		}
	}
}

// TestReplayFollowsWalk: Replay visits the very steps of the seed's walk,
// and its server snapshots follow one another.
func TestReplayFollowsWalk(t *testing.T) {
	t.Parallel()
	cfg := deep
	cfg.Variant = Fixed
	w, err := Walk(cfg, 7, 400)
	if err != nil {
		t.Fatal(err)
	}
	var steps []Step
	var last Server
	ops := map[OpKind]int{}
	_, err = Replay(cfg, 7, 400, func(s ServerStep) error {
		if len(steps) > 0 && !reflect.DeepEqual(s.Before, last) {
			t.Fatalf("step %d: before %+v, the last step left %+v", len(steps), s.Before, last)
		}
		steps = append(steps, s.Step)
		last = s.After
		ops[s.Op.Kind]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(steps, w.Trace) {
		t.Fatal("Replay's steps are not the walk's")
	}
	for _, k := range []OpKind{OpNone, OpTick, OpTry, OpRelease} {
		if ops[k] == 0 {
			t.Errorf("no step of kind %d in a %d-step walk", k, len(steps))
		}
	}
	stop := errors.New("stop")
	n := 0
	if _, err := Replay(cfg, 7, 400, func(ServerStep) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("visit's error: Replay returned %v after %d steps", err, n)
	}
}
