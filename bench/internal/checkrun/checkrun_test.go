package checkrun

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/serial"
	"github.com/fencelock/fencelock/internal/testenv"
)

// TestCheckQuick runs `bench check -quick` through Run, with real servers
// and real faults, and asserts the targets: every fenced kind shows
// no anomaly of its data, with acknowledged writes and faults applied; at
// least one unfenced kind shows one; fencelock's kinds (fenced or not) show
// no anomaly of the lock itself: no two leases of one lock overlap unless
// a data-loss fault explains it (exclusion), and no waiter that left leaves
// the lock stuck (liveness); on the lease kinds a frozen waiter was handed
// the lock and another client took it before the thaw (the case the
// exclusion check is there for), and waiters left the queue; the run fits
// in a few minutes.
func TestCheckQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and redis-servers and runs for ~100s: not in -short")
	}
	serial.Heavy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsn, closePG, err := testenv.PostgresOrStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closePG()

	dir := t.TempDir()
	jsonFile, htmlFile := filepath.Join(dir, "check.json"), filepath.Join(dir, "check.html")
	var out, progress bytes.Buffer
	start := time.Now()
	// The semaphore workload has a test of its own (TestSemaphoreWorkload).
	var kinds []string
	for _, k := range kindNames() {
		if !isSemaphore(k) {
			kinds = append(kinds, k)
		}
	}
	rep, err := Run(ctx, []string{"-quick", "-locks", strings.Join(kinds, ","), "-database-url", dsn, "-json", jsonFile, "-html", htmlFile}, &out, &progress)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, progress.String())
	}
	t.Logf("%v\n%s", elapsed.Round(time.Millisecond), out.String())
	// -quick's budget is about 2 minutes on its own; the test's PostgreSQL
	// is started outside it, and a loaded machine gets some slack.
	if elapsed > 180*time.Second {
		t.Errorf("-quick took %v, want ≤ 3 minutes", elapsed)
	}

	if len(rep.Kinds) != len(kinds) {
		t.Fatalf("%d kinds ran, want %d", len(rep.Kinds), len(kinds))
	}
	unfencedCaught := []string{}
	var waiters WaiterStats // summed over the lease kinds
	left := 0
	for _, k := range rep.Kinds {
		s := k.Summary
		if k.Error != "" {
			t.Errorf("%s: %s", k.Lock.Name, k.Error)
			continue
		}
		switch {
		case k.Election != nil:
			checkElection(t, k)
		case k.Lock.Family == locks.Fencelock:
			checkLockProperties(t, k)
		}
		if w := k.Waiters; w != nil {
			waiters.Frozen += w.Frozen
			waiters.HandedFrozen += w.HandedFrozen
			waiters.TakenBeforeCont += w.TakenBeforeCont
			waiters.Closed += w.Closed
			for _, n := range w.Left {
				left += n
			}
		}
		if !k.Lock.Fenced {
			if s.DataAnomalies() > 0 {
				unfencedCaught = append(unfencedCaught, k.Lock.Name)
			}
			continue
		}
		if n := s.DataAnomalies(); n != 0 {
			t.Errorf("%s (fenced): %d anomalies of its data, want 0: %+v", k.Lock.Name, n, k.Anomalies())
		}
		if s.Acked == 0 || s.Faults == 0 {
			t.Errorf("%s (fenced): %d acked ops, %d faults applied: want both > 0", k.Lock.Name, s.Acked, s.Faults)
		}
		if len(s.Undecided) > 0 {
			t.Logf("%s: undecided: %v", k.Lock.Name, s.Undecided)
		}
	}
	if len(unfencedCaught) == 0 {
		t.Errorf("no unfenced kind showed an anomaly; want at least one")
	}
	// The waiter-process faults staged their cases on the lease kinds.
	t.Logf("waiters over the lease kinds: %d frozen, %d handed the lock while frozen, %d taken by another client before the thaw; %d left the queue, %d after Close",
		waiters.Frozen, waiters.HandedFrozen, waiters.TakenBeforeCont, left, waiters.Closed)
	if waiters.HandedFrozen == 0 || waiters.TakenBeforeCont == 0 {
		t.Errorf("no frozen waiter was handed the lock and had it taken by another client before its thaw: the pause-waiter fault staged nothing")
	}
	if left == 0 {
		t.Errorf("no waiter left the queue: the leave-queue fault staged nothing")
	}
	if v := rep.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}

	// The JSON holds every kind's history, and the HTML its timeline.
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if len(back.Kinds) != len(rep.Kinds) || len(back.Kinds[0].History.Ops) == 0 || back.Seed != rep.Seed {
		t.Errorf("JSON: %d kinds, seed %d; want %d kinds with their histories, seed %d",
			len(back.Kinds), back.Seed, len(rep.Kinds), rep.Seed)
	}
	page, err := os.ReadFile(htmlFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", `class="fault"`, `class="anomaly"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
	if !strings.Contains(out.String(), "-seed ") {
		t.Errorf("the output does not give the seed to replay:\n%s", out.String())
	}
}

// checkLockProperties asserts that one of fencelock's kinds shows no
// anomaly of the lock itself: exclusion judged its leases (and liveness its
// leaving waiters, on the lease kinds) and found nothing.
func checkLockProperties(t *testing.T, k Kind) {
	t.Helper()
	s := k.Summary
	ex, ran := s.Anomalies[check.CheckerExclusion]
	if !ran || s.Leases == 0 {
		t.Errorf("%s: the exclusion checker did not run over leases (%d recorded)", k.Lock.Name, s.Leases)
	}
	for _, res := range k.Results {
		if res.Checker != check.CheckerExclusion && res.Checker != check.CheckerLiveness {
			continue
		}
		for _, n := range res.Notes {
			t.Logf("%s: %s: %s", k.Lock.Name, res.Checker, n)
		}
		for _, a := range res.Anomalies {
			t.Logf("%s: %s: %s: %s", k.Lock.Name, res.Checker, a.Kind, a.Detail)
		}
	}
	if ex != 0 {
		t.Errorf("%s: %d overlaps of two holders' lease windows that no data-loss fault explains, want 0 (a lock bug: on the fair lease, a waiter frozen across a handoff to it that takes the stale handoff for a fresh one)",
			k.Lock.Name, ex)
	}
	if fairLease(k.Lock) {
		if _, ran := s.Anomalies[check.CheckerLiveness]; !ran {
			t.Errorf("%s: the liveness checker did not run", k.Lock.Name)
		}
		if n := s.Anomalies[check.CheckerLiveness]; n != 0 {
			t.Errorf("%s: %d liveness anomalies (a lock stuck, or handed to a waiter that had left), want 0", k.Lock.Name, n)
		}
		applied := map[check.Fault]bool{}
		for _, w := range k.Schedule {
			applied[w.Fault] = true
		}
		if !applied[check.FaultPauseWaiter] || !applied[check.FaultLeaveQueue] {
			t.Errorf("%s: pause-waiter applied %v, leave-queue applied %v; want both (skipped: %+v)", k.Lock.Name,
				applied[check.FaultPauseWaiter], applied[check.FaultLeaveQueue], k.Skipped)
		}
	}
}

// TestQuickPlan: the quick schedule gives every fault a window, whatever
// the seed, and every window outlasts the TTL by half.
func TestQuickPlan(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		o, err := parse([]string{"-quick", "-seed", itoa(seed)}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := check.Schedule(o.plan)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[check.Fault]bool{}
		for _, w := range ws {
			seen[w.Fault] = true
			if w.Duration < o.ttl*3/2 {
				t.Fatalf("seed %d: window %v shorter than 1.5 TTL (%v)", seed, w.Duration, o.ttl)
			}
		}
		if len(seen) != len(check.AllFaults) {
			t.Fatalf("seed %d: %d windows cover %d of %d faults", seed, len(ws), len(seen), len(check.AllFaults))
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
