package check

import (
	"fmt"
	"testing"
	"time"
)

// simulate is a tiny discrete-time model of a check run, end to end through
// the Recorder and the checkers: clients take a lease (ttl 10 ms) on one
// lock, append an element, then read-modify-write a counter, and release.
// The nemesis pauses the holder for each pause-holder window, so its lease
// expires and another client takes over while it still means to write.
// With fenced, the storage applies the verifier's rule; without, it
// accepts every write (Seq 0 tokens). A reader reads the counter every ms.
func simulate(t *testing.T, fenced bool, seed int64) (History, Final, []Window) {
	t.Helper()
	const clients, ttl, dur = 4, 10 * time.Millisecond, 2 * time.Second
	sched, err := Schedule(Plan{Seed: seed, Duration: dur, Faults: []Fault{FaultPauseHolder},
		MinLen: ms(15), MaxLen: ms(40), MinGap: ms(20), MaxGap: ms(60)})
	if err != nil {
		t.Fatal(err)
	}
	var now time.Duration
	rec := NewRecorderClock(time.Unix(0, 0), func() time.Duration { return now })

	type client struct {
		holder      string
		tok         Token
		step        int // 0 idle, 1 append due, 2 incr write due
		due         time.Duration
		pausedUntil time.Duration
		incr        *Handle
		read        int64
		lease       *LeaseHandle
	}
	cs := make([]*client, clients)
	for i := range cs {
		cs[i] = &client{}
	}
	var (
		lockHolder  = -1
		lockExpires time.Duration
		seq         uint64
		counter     int64
		set         []int64
		high        Token
		commit      uint64
		acquisition int
		nextElem    int64
	)
	accept := func(tk Token) bool {
		if !fenced {
			return true
		}
		if high.Seq != 0 && !tk.Supersedes(high) {
			return false
		}
		high = tk
		return true
	}
	wi := 0
	for now = 0; now < dur; now += time.Millisecond {
		if wi < len(sched) && now >= sched[wi].Start {
			if lockHolder >= 0 && now < lockExpires {
				cs[lockHolder].pausedUntil = sched[wi].End()
			}
			wi++
		}
		if lockHolder >= 0 && now >= lockExpires {
			lockHolder = -1
		}
		for i, c := range cs {
			if now < c.pausedUntil {
				continue
			}
			switch {
			case c.step == 0 && lockHolder < 0:
				acquisition++
				seq++
				lockHolder, lockExpires = i, now+ttl
				c.holder = fmt.Sprintf("lease-%d", acquisition)
				c.tok = Token{Holder: c.holder}
				if fenced {
					c.tok = Token{Key: "lock", Seq: seq, Holder: c.holder}
				}
				c.lease = rec.Acquired(Lease{Client: i, Lock: "lock", Holder: c.holder, Held: true,
					Token: Token{Key: "lock", Seq: seq, Holder: c.holder}}, time.Unix(0, 0).Add(now+ttl))
				c.step, c.due = 1, now+time.Millisecond
			case c.step == 1 && now >= c.due:
				nextElem++
				h := rec.Invoke(Op{Client: i, Holder: c.holder, Kind: KindAppend, Resource: "set", Value: nextElem, Token: c.tok})
				if accept(c.tok) {
					set = append(set, nextElem)
					commit++
					h.Ok(commit)
				} else {
					h.Reject(fmt.Errorf("stale token %v", c.tok))
				}
				c.incr = rec.Invoke(Op{Client: i, Holder: c.holder, Kind: KindIncr, Resource: "ctr", Token: c.tok})
				c.read = counter
				c.incr.Writing(c.read + 1)
				c.step, c.due = 2, now+2*time.Millisecond
			case c.step == 2 && now >= c.due:
				if accept(c.tok) {
					counter = c.read + 1
					commit++
					c.incr.Ok(commit)
				} else {
					c.incr.Reject(fmt.Errorf("stale token %v", c.tok))
				}
				c.lease.Released()
				if lockHolder == i {
					lockHolder = -1
				}
				c.step = 0
			}
		}
		rec.Invoke(Op{Client: clients, Kind: KindRead, Resource: "ctr"}).OkRead(false, counter)
	}
	return rec.History(), Final{Registers: map[string]int64{"ctr": counter}, Sets: map[string][]int64{"set": set}}, sched
}

func runCheckers(h History, final Final) []Result {
	return []Result{CheckFencedMutex(h), CheckLostUpdates(h, final, nil), CheckLinearizable(h, LinearOptions{Timeout: 20 * time.Second}),
		CheckExclusion(h, nil)}
}

func TestSimulatedRunFencedIsClean(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		h, final, sched := simulate(t, true, seed)
		s := Summarize("sim-fenced", true, seed, h, sched, runCheckers(h, final)...)
		if s.TotalAnomalies() != 0 || len(s.Undecided) != 0 {
			t.Fatalf("seed %d: fenced run has anomalies: %+v", seed, s)
		}
		if s.Rejected == 0 || s.Faults == 0 || s.Acked < 1000 {
			t.Fatalf("seed %d: the faults did not bite: %+v", seed, s)
		}
	}
}

func TestSimulatedRunUnfencedIsCaught(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		h, final, sched := simulate(t, false, seed)
		s := Summarize("sim-unfenced", false, seed, h, sched, runCheckers(h, final)...)
		if s.Rejected != 0 {
			t.Fatalf("seed %d: unfenced storage rejected writes", seed)
		}
		for _, c := range DataCheckers {
			if c == CheckerPermits {
				continue // a semaphore's: the simulation has locks only
			}
			if s.Anomalies[c] == 0 {
				t.Fatalf("seed %d: checker %s found nothing in an unfenced run under pauses: %+v", seed, c, s)
			}
		}
		// The lock itself is correct: the holders were paused after their
		// Acquire returned, past their deadline, which is not a lock bug.
		if s.Anomalies[CheckerExclusion] != 0 || s.Leases < 500 {
			t.Fatalf("seed %d: %d exclusion anomalies over %d leases, want 0 over many", seed, s.Anomalies[CheckerExclusion], s.Leases)
		}
	}
}
