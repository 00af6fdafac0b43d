package perf

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/serial"
	"github.com/fencelock/fencelock/bench/internal/servers"
)

// TestPerfServers runs the quick perf with -servers redis,valkey: the lease
// and raw also run on Valkey, in the same rounds, as lease@valkey and
// raw@valkey, paired with raw on the same server; the header names both
// servers by their own names, and the report has the Valkey/Redis table.
func TestPerfServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server and a valkey-server")
	}
	if !servers.Installed("valkey") {
		t.Skip("valkey-server is not installed (scripts/deps.sh --valkey)")
	}
	serial.Heavy(t)
	rep, out := runPerf(t, "-quick", "-servers", "redis,valkey", "-redis-url", "", "-locks", "raw,lease,redislock",
		"-scenarios", "uncontended,hotkey,waiters")
	if m := rep.Machine; !strings.HasPrefix(m.Redis, "redis ") || len(m.Others) != 1 || !strings.HasPrefix(m.Others[0], "valkey 8") {
		t.Errorf("machine names redis %q and others %q, want redis … and valkey 8…", m.Redis, m.Others)
	}
	var order []string
	for _, r := range rep.Results {
		if r.Scenario == "uncontended" {
			order = append(order, r.Lock)
		}
	}
	if want := []string{"raw", "raw@valkey", "lease", "lease@valkey", "redislock"}; !slices.Equal(order, want) {
		t.Errorf("uncontended rows %v, want %v", order, want)
	}
	for _, k := range [][2]string{{"lease@valkey", "uncontended"}, {"raw@valkey", "uncontended"}, {"lease@valkey", "hotkey"}} {
		r := report.Find(rep.Results, k[0], k[1])
		switch {
		case r == nil:
			t.Errorf("no %s %s", k[0], k[1])
		case r.Errors > 0:
			t.Errorf("%s %s: %d errors, first: %s", k[0], k[1], r.Errors, r.FirstErr)
		case len(r.PerRound) == 0 || r.BestPeer != "" || r.VsBest != nil:
			t.Errorf("%s %s: no rounds, or paired with a peer on another server: %+v", k[0], k[1], r)
		case k[1] == "uncontended" && (r.P50us == nil || r.VsRaw == nil):
			t.Errorf("%s %s: no p50 or ×raw: %+v", k[0], k[1], r)
		case k[1] == "hotkey" && (r.OpsPerSec == nil || r.VsCeiling == nil):
			t.Errorf("%s %s: no cs/s or ×ceiling: %+v", k[0], k[1], r)
		}
	}
	if r := report.Find(rep.Results, "lease", "uncontended"); r == nil || r.BestPeer != "redislock" {
		t.Errorf("lease on redis lost its best peer: %+v", r)
	}
	if r := report.Find(rep.Results, "lease@valkey", "waiters"); r != nil {
		t.Errorf("waiters ran lease@valkey: %+v", r)
	}
	if rep.Locks["lease@valkey"] == "" || !strings.HasPrefix(rep.Locks["lease@valkey"], "on valkey 8") {
		t.Errorf("locks.lease@valkey does not say its server: %q", rep.Locks["lease@valkey"])
	}
	for _, s := range []string{"redis ", "valkey ", "What does moving from redis to valkey cost?", "valkey ×redis", "lease@valkey"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

// TestPickServers: -servers keeps the order given (the first is the one
// every lock runs on), refuses unknown and repeated kinds, and by default
// adds valkey when valkey-server is installed, saying so when it is not.
func TestPickServers(t *testing.T) {
	for _, c := range []struct {
		list string
		want []string
		err  string
	}{
		{"valkey,redis", []string{"valkey", "redis"}, ""},
		{" redis ", []string{"redis"}, ""},
		{"redis,keydb", nil, `unknown "keydb"`},
		{"redis,redis", nil, `"redis" twice`},
		{",", nil, "empty list"},
	} {
		got, note, err := pickServers(c.list, false)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want %q", c.list, err, c.err)
		case c.err == "" && (err != nil || !slices.Equal(got, c.want) || note != ""):
			t.Errorf("%q: %v, %q, %v; want %v", c.list, got, note, err, c.want)
		}
	}
	if got, note, _ := pickServers("", true); !slices.Equal(got, []string{"redis"}) || note != "" {
		t.Errorf("with -redis-url the default is %v (%q), want redis alone", got, note)
	}

	// A PATH with redis-server alone: the default says Valkey is missing.
	valkey, lookErr := exec.LookPath("valkey-server")
	dir := t.TempDir()
	bin, err := os.Executable() // any executable will do: LookPath runs nothing
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "redis-server")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	got, note, err := pickServers("", false)
	if err != nil || !slices.Equal(got, []string{"redis"}) || !strings.Contains(note, "valkey-server is not installed") {
		t.Errorf("without valkey-server: %v, %q, %v", got, note, err)
	}
	if lookErr != nil {
		t.Skip("valkey-server is not installed: the default with it is not checked")
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+filepath.Dir(valkey))
	if got, note, _ := pickServers("", false); !slices.Equal(got, []string{"redis", "valkey"}) || note != "" {
		t.Errorf("with valkey-server: %v, %q", got, note)
	}
}

// runPerf runs `bench perf` with args and returns its report as the JSON
// has it, and its text.
func runPerf(t *testing.T, args ...string) (*report.Perf, string) {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "perf.json")
	var stdout, stderr bytes.Buffer
	if err := Run(t.Context(), append(args, "-json", jsonPath), &stdout, &stderr); err != nil {
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
	return &rep, stdout.String()
}
