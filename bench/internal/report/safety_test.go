package report

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const evil = "<script>alert(1)</script>"

// testSafety is 2 scenarios × 3 locks, one fenced; clockjump/redsync
// ended in an error, clockjump/lease+verifier lost an update and
// clockjump/naive showed nothing.
func testSafety() *Safety {
	cell := func(scen, lock string, ops, acked, rejected, lost, stale, overlaps int) SafetyResult {
		return SafetyResult{Scenario: scen, Lock: lock, Ops: ops, Acked: acked, Rejected: rejected,
			LostUpdates: lost, StaleAccepted: stale, Overlaps: overlaps, Anomalies: lost + stale, Seconds: 1.25}
	}
	errCell := cell("clockjump", "redsync", 7, 6, 0, 0, 0, 0)
	errCell.Failed = 1
	errCell.Error = "redis down " + evil
	rep := &Safety{
		Header: Header{
			Command:   "go run ./bench safety -quick",
			Timestamp: "2025-01-02T03:04:05Z",
			Quick:     true,
			Elapsed:   "12s",
			Machine:   Machine{CPUs: 8, GOOS: "linux", GOARCH: "amd64", Go: "go1.26", Redis: "7.2.4", Postgres: "16.3", Servers: "throwaway"},
			Versions:  map[string]string{"fencelock": "git v0.1.0", "github.com/go-redsync/redsync/v4": "v4.13.0"},
		},
		TTL:    "500ms",
		Rounds: 4,
		Extra:  2,
		Scenarios: []ScenarioInfo{
			{Name: "paused", Title: "Holder paused past TTL", How: "SIGSTOP the holder for 2×TTL"},
			{Name: "clockjump", Title: "Clock jump", How: "advance the clock " + evil},
		},
		Locks: []LockInfo{
			{Name: "naive", Nodes: 1, Note: "SETNX + DEL " + evil},
			{Name: "lease+verifier", Fenced: true, Nodes: 1},
			{Name: "redsync", Nodes: 1},
		},
		Results: []SafetyResult{
			cell("paused", "naive", 20, 20, 0, 3, 2, 4),
			cell("paused", "lease+verifier", 20, 15, 5, 0, 0, 5),
			cell("paused", "redsync", 20, 20, 0, 1, 0, 2),
			cell("clockjump", "naive", 20, 20, 0, 0, 0, 0),
			cell("clockjump", "lease+verifier", 20, 19, 1, 1, 0, 1),
			errCell,
		},
	}
	rep.Check()
	return rep
}

func TestSafetyTable(t *testing.T) {
	rep := testSafety()
	if len(rep.Violations) != 3 {
		t.Fatalf("violations = %q, want 3", rep.Violations)
	}
	var buf bytes.Buffer
	WriteSafetyTable(&buf, rep)
	out := buf.String()
	t.Log("\n" + out)

	for _, want := range []string{
		"go run ./bench safety -quick", "2025-01-02T03:04:05Z", "8 CPUs", "go1.26", "redis 7.2.4", "postgres 16.3",
		"ttl 500ms", "4 rounds", "+2 clean ops each",
		"lease+verifier*", "* fenced: token checked by the verifier",
		"3/2 ·4!", "1/0 ·2!", "0/0 ·5", "0/0 ·0", "1/0 ·1!", "err",
		"lost_updates", "stale_accepted", "overlaps", "seconds",
		"error: redis down " + evil,
		"must hold: 3 VIOLATED",
		"clockjump/lease+verifier: fenced kind lost 1 update and accepted 0 stale writes",
		"clockjump/naive: unfenced kind showed no anomaly",
		"clockjump: provoked nothing in any unfenced kind",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if strings.Contains(out, "0/0 ·5!") || strings.Contains(out, "0/0 ·0!") {
		t.Error("a clean cell is marked as an anomaly")
	}
	if strings.Contains(out, "naive*") || strings.Contains(out, "redsync*") {
		t.Error("an unfenced lock is marked fenced")
	}

	// Matrix rows are the scenarios in order, columns the locks in order.
	lines := strings.Split(out, "\n")
	row := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starts with %q", prefix)
		return ""
	}
	head := row("scenario ")
	if !(strings.Index(head, "naive") < strings.Index(head, "lease+verifier*") && strings.Index(head, "lease+verifier*") < strings.Index(head, "redsync")) {
		t.Errorf("matrix header out of order: %q", head)
	}
	if f := strings.Fields(row("paused ")); !slices.Equal(f, []string{"paused", "3/2", "·4!", "0/0", "·5", "1/0", "·2!"}) {
		t.Errorf("paused row = %q", f)
	}
	if f := strings.Fields(row("clockjump ")); !slices.Equal(f, []string{"clockjump", "0/0", "·0", "1/0", "·1!", "err"}) {
		t.Errorf("clockjump row = %q", f)
	}

	rep.Violations = nil
	buf.Reset()
	WriteSafetyTable(&buf, rep)
	if !strings.Contains(buf.String(), "must hold: ok") {
		t.Error("no violations, but no \"must hold: ok\"")
	}
}

func TestSafetyHTML(t *testing.T) {
	rep := testSafety()
	path := filepath.Join(t.TempDir(), "sub", "safety.html")
	if err := WriteSafetyHTML(path, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)

	for _, want := range []string{
		"<title>fencelock safety</title>", "go run ./bench safety -quick", "2025-01-02T03:04:05Z", "8 CPUs",
		"redis 7.2.4", "postgres 16.3", "ttl 500ms", "4 faulted rounds", "took 12s", "-quick",
		"Holder paused past TTL", "SIGSTOP the holder for 2×TTL", "Clock jump",
		"fenced: token checked by the verifier",
		"<span>3 lost ·</span> <span>2 stale</span>", "4 overlaps", "1 overlap<", "<span>15 acked /</span> <span>5 rejected</span>", "<span>6 acked /</span> <span>0 rejected</span> <span>/ 1 failed</span>", "did not finish",
		`class="cell bad"`, `class="cell good"`, `class="cell err"`,
		"3 VIOLATED",
		"clockjump/lease+verifier: fenced kind lost 1 update and accepted 0 stale writes",
		"clockjump/naive: unfenced kind showed no anomaly",
		"clockjump: provoked nothing in any unfenced kind",
		"github.com/go-redsync/redsync/v4", "v4.13.0", "git v0.1.0",
		"lost updates", "stale accepted",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Count(page, `class="cell bad"`) != 3 {
		t.Errorf("want 3 bad cells, got %d", strings.Count(page, `class="cell bad"`))
	}
	if strings.Count(page, `class="cell good"`) != 2 {
		t.Errorf("want 2 good cells, got %d", strings.Count(page, `class="cell good"`))
	}
	// The fenced column comes after the unfenced ones.
	if i, j := strings.Index(page, ">redsync</th>"), strings.Index(page, ">lease+<wbr>verifier</th>"); i < 0 || j < 0 || i > j {
		t.Errorf("fenced column not grouped after the unfenced ones (%d, %d)", i, j)
	}
	// The verdict comes before the matrix; the matrix ends with how often
	// each kind's data suffered: 1 of 2 scenarios for all three (redsync's
	// errored clockjump cell counts as run).
	if i, j := strings.Index(page, "3 VIOLATED"), strings.Index(page, "<table class=matrix>"); i < 0 || j < 0 || i > j {
		t.Errorf("verdict not above the matrix (%d, %d)", i, j)
	}
	if n := strings.Count(page, "<span class=bad-n>1</span> of 2"); !strings.Contains(page, "the data suffered in") || n != 3 {
		t.Errorf("summary row: %d locks with 1 of 2, want 3", n)
	}
	for _, want := range []string{"<th class=l>error</th>", `id=scenarios`, `id=locks`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("an unescaped <script> reached the page")
	}
	if n := strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 3 {
		t.Errorf("escaped script appears %d times, want at least 3 (note, how, error)", n)
	}

	// A missing cell is shown as not run; no violations reads ok.
	rep.Results = rep.Results[:5]
	rep.Check()
	if err := WriteSafetyHTML(path, rep); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if !strings.Contains(string(b), `class="cell missing"`) || !strings.Contains(string(b), ">not run</div>") {
		t.Error("missing cell not shown as missing")
	}
	// Without the errored cell, no result has an error: no error column.
	if strings.Contains(string(b), "<th class=l>error</th>") {
		t.Error("an error column although no result has an error")
	}
	// redsync now ran in 1 scenario, where its data suffered.
	if !strings.Contains(string(b), "<span class=bad-n>1</span> of 1") {
		t.Error("summary row lacks redsync's 1 of 1")
	}

	// A long lock name may break after its "/", "+" and "-".
	rep.Locks = append(rep.Locks, LockInfo{Name: "lease+verifier/write-only"})
	if err := WriteSafetyHTML(path, rep); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if !strings.Contains(string(b), ">lease+<wbr>verifier/<wbr>write-<wbr>only</th>") {
		t.Error("no break opportunity after the / of a long lock name")
	}
	if !strings.Contains(string(b), "<span>0</span> of 0") {
		t.Error("a lock run in no scenario lacks its 0 of 0")
	}
	rep.Violations = nil
	if err := WriteSafetyHTML(path, rep); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if !strings.Contains(string(b), "<span class=ok>ok</span>") {
		t.Error("no violations, but the verdict is not ok")
	}
}

func TestSafetyCheck(t *testing.T) {
	base := func() *Safety {
		return &Safety{
			Scenarios: []ScenarioInfo{{Name: "s"}},
			Locks:     []LockInfo{{Name: "naive"}, {Name: "redsync"}, {Name: "fenced", Fenced: true}},
			Results: []SafetyResult{
				{Scenario: "s", Lock: "naive", LostUpdates: 2, Anomalies: 2},
				{Scenario: "s", Lock: "redsync", StaleAccepted: 1, Anomalies: 1},
				{Scenario: "s", Lock: "fenced", Rejected: 3},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*Safety)
		want   []string
	}{
		{"all good", func(*Safety) {}, nil},
		{"fenced with anomalies", func(r *Safety) {
			r.Results[2].LostUpdates, r.Results[2].StaleAccepted, r.Results[2].Anomalies = 1, 2, 3
		}, []string{"s/fenced: fenced kind lost 1 update and accepted 2 stale writes"}},
		{"fenced with an error", func(r *Safety) {
			r.Results[2].Error = "boom"
		}, []string{"s/fenced: did not run to the end: boom"}},
		{"unfenced with no anomaly", func(r *Safety) {
			r.Results[1].StaleAccepted, r.Results[1].Anomalies = 0, 0
		}, []string{"s/redsync: unfenced kind showed no anomaly"}},
		{"unfenced with an error and no anomaly", func(r *Safety) {
			r.Results[1].StaleAccepted, r.Results[1].Anomalies, r.Results[1].Error = 0, 0, "timeout"
		}, nil},
		{"no unfenced kind provoked", func(r *Safety) {
			for i := range 2 {
				r.Results[i].LostUpdates, r.Results[i].StaleAccepted, r.Results[i].Anomalies = 0, 0, 0
			}
		}, []string{"s/naive: unfenced kind showed no anomaly", "s/redsync: unfenced kind showed no anomaly",
			"s: provoked nothing in any unfenced kind"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.change(r)
			r.Violations = []string{"stale from a previous check"}
			r.Check()
			if !slices.Equal(r.Violations, tc.want) {
				t.Errorf("violations = %q, want %q", r.Violations, tc.want)
			}
		})
	}
}
