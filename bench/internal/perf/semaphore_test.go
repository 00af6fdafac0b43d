package perf

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/serial"
)

// TestPerfSemaphore runs the semaphore rows (-quick) against a throwaway
// Redis: fencelock's semaphore, the naive one and raw uncontended, with
// what each acquire+release costs (the naive semaphore's free slot 0 costs
// exactly raw's commands); the hot semaphore's shares; the waiters each
// get a permit once, and never more holders than permits; and the three
// tables reach the text and the HTML.
func TestPerfSemaphore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	serial.Heavy(t)
	t.Setenv("REDIS_URL", "") // a throwaway server: no one else's commands in its stats
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "perf.json"), filepath.Join(dir, "perf.html")
	var stdout, stderr bytes.Buffer
	if err := Run(t.Context(), []string{"-quick", "-scenarios", "semaphore", "-servers", "redis", "-json", jsonPath, "-html", htmlPath}, &stdout, &stderr); err != nil {
		t.Fatalf("perf: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Perf
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	get := func(lock, scen string) *report.Result {
		t.Helper()
		r := report.Find(rep.Results, lock, scen)
		if r == nil {
			t.Fatalf("no %s/%s result: %+v", lock, scen, rep.Results)
		}
		if r.Errors > 0 {
			t.Errorf("%s/%s: %d errors, first: %s", lock, scen, r.Errors, r.FirstErr)
		}
		return r
	}
	for _, l := range []string{"raw", "semaphore", "naive-sem"} {
		r, c := get(l, "sem_uncontended"), get(l, "sem_cost")
		if r.P50us == nil || *r.P50us <= 0 || len(r.PerRound) != quickSizes.rounds || r.VsRaw == nil {
			t.Errorf("%s/sem_uncontended: %+v", l, r)
		}
		if c.AllocsPerOp == nil || c.CmdsPerOp == nil || c.Samples != quickSizes.costOps {
			t.Errorf("%s/sem_cost: %+v", l, c)
		}
		t.Logf("%s: p50 %.1f µs (×raw %.2f), %.1f allocs/op, %s", l, *r.P50us, *r.VsRaw, *c.AllocsPerOp, report.CommandsText(c.Commands))
	}
	if raw, naive := get("raw", "sem_cost"), get("naive-sem", "sem_cost"); !maps.Equal(raw.Commands, naive.Commands) {
		t.Errorf("naive-sem on a free semaphore ran %v, want raw's %v", naive.Commands, raw.Commands)
	}
	if r := report.Find(rep.Results, "raw", "sem_hotkey"); r != nil {
		t.Errorf("raw has no waiting acquire, yet a sem_hotkey row: %+v", r)
	}
	for _, l := range []string{"semaphore", "naive-sem"} {
		h, w := get(l, "sem_hotkey"), get(l, "sem_waiters")
		if h.Workers != semWorkers || h.Permits != semPermits || h.OpsPerSec == nil || h.MinShare == nil || h.MaxShare == nil ||
			*h.MinShare > *h.MaxShare || h.VsCeiling == nil {
			t.Errorf("%s/sem_hotkey: %+v", l, h)
		}
		if w.Samples != quickSizes.waiters || w.AllAcquiredMs == nil || w.CmdsPerOp == nil {
			t.Errorf("%s/sem_waiters: %+v", l, w)
		}
		t.Logf("%s: hot %.0f cs/s, shares %.3f–%.3f; %d waiters all got and released in %.1f ms, %.1f commands each",
			l, *h.OpsPerSec, *h.MinShare, *h.MaxShare, w.Samples, *w.AllAcquiredMs, *w.CmdsPerOp)
	}
	// Fair: every worker of the hot semaphore got its permit in each round.
	if h := get("semaphore", "sem_hotkey"); *h.MinShare == 0 {
		t.Errorf("semaphore/sem_hotkey: a worker got no permit in most rounds (shares %.3f–%.3f)", *h.MinShare, *h.MaxShare)
	}
	out := stdout.String()
	for _, s := range []string{"How fast is a semaphore's permit uncontended? (10 permits)", "×naive-sem",
		"How fair is a semaphore under contention? (64 workers, 10 permits)", "sleep ceiling",
		"How long until 100 waiters got a permit each? (10 permits)", "commands per waiter: semaphore"} {
		if !strings.Contains(out, s) {
			t.Errorf("the table lacks %q:\n%s", s, out)
		}
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("How fair is a semaphore under contention?")) {
		t.Error("the HTML lacks the semaphore's fairness table")
	}
}
