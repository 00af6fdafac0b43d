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
)

// TestCostCounts runs the cost scenario on raw and lease against a
// throwaway Redis: raw's acquire+release is exactly SET, then EVALSHA of
// a script that runs GET and DEL (4 commands), and the lease's figures
// are there, counted per op, in the JSON, the table and the targets.
func TestCostCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	t.Setenv("REDIS_URL", "") // a throwaway server: no one else's commands in its stats
	jsonPath := filepath.Join(t.TempDir(), "cost.json")
	var stdout, stderr bytes.Buffer
	if err := Run(t.Context(), []string{"-quick", "-locks", "raw,lease", "-scenarios", "cost", "-json", jsonPath}, &stdout, &stderr); err != nil {
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
	raw, lease := report.Find(rep.Results, "raw", "cost"), report.Find(rep.Results, "lease", "cost")
	if raw == nil || lease == nil {
		t.Fatalf("no cost results: %+v", rep.Results)
	}
	for _, r := range []*report.Result{raw, lease} {
		if r.Errors > 0 || r.Samples != quickSizes.costOps || r.AllocsPerOp == nil || r.BytesPerOp == nil || r.CmdsPerOp == nil {
			t.Errorf("%s: %+v", r.Lock, r)
		}
	}
	if want := map[string]float64{"set": 1, "evalsha": 1, "get": 1, "del": 1}; !maps.Equal(raw.Commands, want) || *raw.CmdsPerOp != 4 {
		t.Errorf("raw ran %v (%v per op), want %v", raw.Commands, *raw.CmdsPerOp, want)
	}
	if *raw.AllocsPerOp < 5 || *lease.AllocsPerOp <= *raw.AllocsPerOp || lease.Commands["evalsha"] != 2 {
		t.Errorf("allocs/op raw %v, lease %v; lease's commands %v", *raw.AllocsPerOp, *lease.AllocsPerOp, lease.Commands)
	}
	t.Logf("allocs/op raw %.1f, lease %.1f; lease's commands: %s", *raw.AllocsPerOp, *lease.AllocsPerOp, report.CommandsText(lease.Commands))
	out := stdout.String()
	for _, s := range []string{"What does one acquire + release cost?", "DEL, EVALSHA, GET, SET", "server commands per acquire+release"} {
		if !strings.Contains(out, s) {
			t.Errorf("the table lacks %q:\n%s", s, out)
		}
	}
}
