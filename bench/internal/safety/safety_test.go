package safety

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/bench/internal/serial"
	"github.com/fencelock/fencelock/internal/testenv"
)

// TestMain lets the test binary play holder A of the pause scenario: the
// scenario re-executes its own binary (os.Executable) with WorkerEnv set.
func TestMain(m *testing.M) {
	if spec := os.Getenv(WorkerEnv); spec != "" {
		if err := RunWorker(spec); err != nil {
			fmt.Fprintln(os.Stderr, "safety worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSafety runs every scenario against every lock kind, one round each,
// with real servers and real faults, and asserts the must-hold rules: the
// fenced kinds lose nothing and accept no stale write, and every unfenced
// kind shows the anomaly the scenario provokes.
func TestSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and ~150 redis-servers: not in -short")
	}
	serial.Heavy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dsn, closePG, err := testenv.PostgresOrStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closePG()

	dir := t.TempDir()
	var out, progress bytes.Buffer
	args := []string{"-quick", "-database-url", dsn,
		"-json", filepath.Join(dir, "safety.json"), "-html", filepath.Join(dir, "safety.html")}
	rep, err := Run(ctx, args, &out, &progress)
	if err != nil {
		t.Fatalf("safety: %v\n%s", err, progress.String())
	}
	t.Logf("\n%s", out.String())

	if want := len(scenarios)*7 + 1 - 2 - 1; len(rep.Results) != want {
		t.Errorf("%d cells, want %d (7 kinds × %d scenarios + write-only in handover - the 2 redlock kinds in server-pause - setnx-getset in clock-jump)",
			len(rep.Results), want, len(scenarios))
	}
	for _, r := range rep.Results {
		t.Run(r.Scenario+"/"+strings.ReplaceAll(r.Lock, "/", "-"), func(t *testing.T) {
			if r.Error != "" {
				t.Fatalf("did not run to the end: %s", r.Error)
			}
			// One faulted round (A and B) and one clean cycle.
			if r.Ops != 3 || r.Overlaps < 1 {
				t.Errorf("ops %d, overlaps %d: want 3 ops and A and B overlapping (the fault took A's lock while it held it)", r.Ops, r.Overlaps)
			}
			if rep.Fenced(r.Lock) {
				if r.LostUpdates != 0 || r.StaleAccepted != 0 {
					t.Errorf("fenced kind: %d lost updates, %d stale writes accepted; want 0 and 0", r.LostUpdates, r.StaleAccepted)
				}
				// The fault reached the fenced kind too: its verifier
				// refused one of the two holders.
				if r.Rejected < 1 {
					t.Errorf("fenced kind: no write rejected, so the fault provoked nothing here")
				}
				return
			}
			if r.LostUpdates < 1 {
				t.Errorf("unfenced kind: no lost update; the scenario provoked nothing")
			}
			// Where B writes before A, A's late write is also a stale
			// write accepted; in the handover A writes first.
			if r.Scenario != "handover" && r.StaleAccepted < 1 {
				t.Errorf("unfenced kind: no stale write accepted")
			}
		})
	}
	if len(rep.Violations) > 0 {
		t.Errorf("must-hold violations:\n%s", strings.Join(rep.Violations, "\n"))
	}
	for _, f := range []string{"safety.json", "safety.html"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v (size %v)", f, err, fi)
		}
	}
}

// TestSafetyFlags checks that bad input is refused before anything starts.
func TestSafetyFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "nope"},
		{"-locks", "mutex"},
		{"-ttl", "10ms"},
		{"extra-arg"},
	} {
		var out bytes.Buffer
		if _, err := parse(args, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	o, err := parse([]string{"-quick", "-scenario", "restart,pause", "-database-url", "postgres://secret@x/y"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 1 || o.ttl != 500*time.Millisecond || len(o.scenarios) != 2 || o.scenarios[0] != "pause" {
		t.Errorf("quick options: %+v", o)
	}
	if strings.Contains(o.command, "secret") {
		t.Errorf("command %q leaks the database URL", o.command)
	}
}

// TestSafetyNoOpFaultIsVoid: a fault that frees nothing must not pass for
// a provoked one. With the fault removed, B cannot get the lock before A's
// would have expired by itself (or ever, against A's keep-alive), and the
// round is reported void instead of clean.
func TestSafetyNoOpFaultIsVoid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and redis-servers")
	}
	serial.Heavy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn, closePG, err := testenv.PostgresOrStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closePG()
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := prepareDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	cfg := &config{ttl: 300 * time.Millisecond, rounds: 1, extra: 0, runID: "noop" + strconv.Itoa(int(time.Now().UnixNano()%1e6)),
		dsn: dsn, db: db, status: func(string, string) {}}
	for _, scen := range []string{"clock-jump", "server-pause"} {
		sc, err := scenarioNamed(scen)
		if err != nil {
			t.Fatal(err)
		}
		nf := sc.fault.(nodeFault)
		nf.hit = func(context.Context, *site, time.Duration) error { return nil }
		sc.fault = nf
		for _, name := range sc.kinds([]string{kindLease, kindLeaseVerifier, kindTimestamp}) {
			k, _ := kindNamed(name)
			r := runCell(ctx, cfg, sc, k)
			if !strings.Contains(r.Error, "the round is void") {
				t.Errorf("%s/%s with a no-op fault: error %q, want a void round", sc.info.Name, name, r.Error)
			}
		}
	}
}
