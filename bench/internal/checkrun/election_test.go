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

// TestElectionWorkload runs the election workload alone, as -quick does:
// leaders paused past their term and killed, and no anomaly of the data.
func TestElectionWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, a redis-server and leader processes for ~20s: not in -short")
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
	rep, err := Run(ctx, []string{"-quick", "-locks", kindElection, "-database-url", dsn}, &out, &progress)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, progress.String())
	}
	t.Log(out.String())
	if len(rep.Kinds) != 1 || rep.Kinds[0].Error != "" {
		t.Fatalf("kinds: %+v", rep.Kinds)
	}
	checkElection(t, rep.Kinds[0])
	if v := rep.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// checkElection asserts that the election workload staged its faults (a
// leader deposed while paused, a leader killed and replaced) and that the
// data shows no anomaly: no append of a deposed leader landed after a newer
// term's, none acknowledged was lost.
func checkElection(t *testing.T, k Kind) {
	t.Helper()
	s, es := k.Summary, k.Election
	if es == nil {
		t.Fatalf("%s: no election stats", k.Lock.Name)
	}
	t.Logf("%s: %+v; %d acked, %d rejected, %d failed, %d unknown", k.Lock.Name, *es, s.Acked, s.Rejected, s.Failed, s.Unknown)
	if es.Deposed == 0 || es.Kills == 0 {
		t.Errorf("%s: %d leaders deposed while paused, %d killed: want both > 0", k.Lock.Name, es.Deposed, es.Kills)
	}
	if es.Terms < 5 || s.Acked == 0 {
		t.Errorf("%s: %d terms, %d acked appends: the workload hardly ran", k.Lock.Name, es.Terms, s.Acked)
	}
	for _, c := range []string{check.CheckerFencedMutex, check.CheckerLostUpdate} {
		n, ran := s.Anomalies[c]
		if !ran || n != 0 {
			t.Errorf("%s: %s ran %v with %d anomalies, want 0: %+v", k.Lock.Name, c, ran, n, k.Anomalies())
		}
	}
}
