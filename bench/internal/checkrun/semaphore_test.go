package checkrun

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/serial"
	"github.com/fencelock/fencelock/internal/testenv"
)

// TestSemaphoreWorkload runs the semaphore workload's two kinds alone, as
// -quick does: writer processes on a semaphore of 3 permits, holders
// stopped past their ttl, delayed and killed, Redis restarted empty,
// waiters stopped. Through the verifier the data shows no anomaly, per
// slot (fenced-mutex) or across the slots (permits: at most 3 holders'
// writes at once), and no acknowledged append is lost; without it, the
// same faults cost data. Either way no two leases of one slot overlap
// unless the restart explains it (exclusion: the semaphore's own
// property).
func TestSemaphoreWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, redis-servers and writer processes for ~30s: not in -short")
	}
	serial.Heavy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn, closePG, err := testenv.PostgresOrStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closePG()
	var out, progress bytes.Buffer
	rep, err := Run(ctx, []string{"-quick", "-locks", kindSemaphore + "," + kindSemaphoreVerifier, "-database-url", dsn}, &out, &progress)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, progress.String())
	}
	t.Log(out.String())
	if len(rep.Kinds) != 2 {
		t.Fatalf("kinds: %+v", rep.Kinds)
	}
	for _, k := range rep.Kinds {
		if k.Error != "" {
			t.Fatalf("%s: %s", k.Lock.Name, k.Error)
		}
		checkSemaphore(t, k)
	}
	if v := rep.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// checkSemaphore asserts that the semaphore workload staged its faults (a
// paused holder's slot granted to another, a holder killed and its slot
// granted again, Redis restarted) and that its data shows no anomaly with
// the verifier and some without it, and the semaphore none of its own.
func checkSemaphore(t *testing.T, k Kind) {
	t.Helper()
	s, ss := k.Summary, k.Semaphore
	if ss == nil {
		t.Fatalf("%s: no semaphore stats", k.Lock.Name)
	}
	t.Logf("%s: %+v; %d acked, %d rejected, %d failed, %d unknown; anomalies %v", k.Lock.Name, *ss,
		s.Acked, s.Rejected, s.Failed, s.Unknown, s.Anomalies)
	if ss.Passed == 0 || ss.Kills == 0 || ss.Restarts == 0 {
		t.Errorf("%s: %d paused holders' slots granted to another meanwhile, %d killed, %d restarts: want all > 0",
			k.Lock.Name, ss.Passed, ss.Kills, ss.Restarts)
	}
	if ss.Acquired < 20 || s.Acked == 0 {
		t.Errorf("%s: %d permits granted, %d acked appends: the workload hardly ran", k.Lock.Name, ss.Acquired, s.Acked)
	}
	for _, c := range []string{check.CheckerFencedMutex, check.CheckerLostUpdate, check.CheckerPermits, check.CheckerExclusion} {
		if _, ran := s.Anomalies[c]; !ran {
			t.Errorf("%s: the %s checker did not run", k.Lock.Name, c)
		}
	}
	if n := s.Anomalies[check.CheckerExclusion]; n != 0 {
		t.Errorf("%s: %d overlaps of two leases of one slot that no data-loss fault explains, want 0: %+v", k.Lock.Name, n, k.Anomalies())
	}
	switch n := s.DataAnomalies(); {
	case k.Lock.Fenced && n != 0:
		t.Errorf("%s: %d anomalies of its data, want 0: %+v", k.Lock.Name, n, k.Anomalies())
	case !k.Lock.Fenced && n == 0:
		t.Errorf("%s: no anomaly of its data: without the verifier, holders paused past their ttl must cost data", k.Lock.Name)
	}
}
