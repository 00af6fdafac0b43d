package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 overlaps", 1: "1 overlap", 2: "2 overlaps"} {
		if got := Plural(n, "overlap"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestPerfErrorCause: each table gives each error count its cause.
func TestPerfErrorCause(t *testing.T) {
	rep := &Perf{Header: Header{Command: "go run ./bench perf", Machine: Machine{CPUs: 1}},
		Results: []Result{
			{Lock: "redlock-3", Scenario: "uncontended", P50us: Ptr(300), P99us: Ptr(900), Errors: 3,
				FirstErr: "redlock: not acquired: redlock: node 127.0.0.1:1: EOF"},
			{Lock: "redlock-3", Scenario: "parallel", OpsPerSec: Ptr(900), Errors: 190,
				FirstErr: "redlock: not acquired: redlock: node 127.0.0.1:2: redlock: node did not answer in time (50ms)"},
			{Lock: "lease", Scenario: "uncontended", P50us: Ptr(100), P99us: Ptr(200)},
		}}
	var out bytes.Buffer
	WritePerfTable(&out, rep)
	table := out.String()
	if !strings.Contains(table, "190 (node timeout)") || !strings.Contains(table, "3 (connection closed)") {
		t.Errorf("table lacks the error count with its cause:\n%s", table)
	}
	if !regexp.MustCompile(`(?m)^lease .* 0$`).MatchString(table) {
		t.Errorf("lease row lacks its 0 errors:\n%s", table)
	}
	if strings.Contains(table, "1 CPUs") {
		t.Errorf("bad plural in %q", table)
	}
}

// perfHTML is the HTML page of rep.
func perfHTML(t *testing.T, rep *Perf) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "perf.html")
	if err := WritePerfHTML(path, rep); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// TestPerfHTMLLabels: a long label gets a label column wide enough, and
// the error cell names the cause.
func TestPerfHTMLLabels(t *testing.T) {
	rep := &Perf{Header: Header{Command: "go run ./bench perf"}, Results: []Result{
		{Lock: "postgres", Scenario: "pg_unguarded", P50us: Ptr(300), P99us: Ptr(500)},
		{Lock: "postgres", Scenario: "pg_guarded_withtx", P50us: Ptr(400), P99us: Ptr(600)},
		{Lock: "redlock-3", Scenario: "parallel", OpsPerSec: Ptr(900), Errors: 2, FirstErr: "context deadline exceeded"},
	}}
	page := perfHTML(t, rep)
	// The label's right edge (text-anchor end) sits 8px left of the bars:
	// 26 characters need about 180px.
	m := regexp.MustCompile(`<text x="(\d+)" y="\d+" text-anchor="end" class=label>postgres pg_guarded_withtx</text>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("no postgres pg_guarded_withtx label")
	}
	if x, _ := strconv.Atoi(string(m[1])); x < 180 {
		t.Errorf("label ends at x=%d: too narrow for postgres pg_guarded_withtx", x)
	}
	if !bytes.Contains(page, []byte("2 (timeout)")) {
		t.Error("the HTML lacks the error count with its cause")
	}
}

// TestProgressPlain: written to a file or a buffer, progress is plain
// lines, never carriage returns.
func TestProgressPlain(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "perf", 0)
	p.Step("uncontended", "raw 1/3")
	p.Step("uncontended", "raw 2/3")
	p.Done()
	out := b.String()
	if strings.Contains(out, "\r") {
		t.Errorf("carriage return in redirected progress: %q", out)
	}
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d lines, want 3: %q", n, out)
	}
	b.Reset()
	p = NewProgress(&b, "perf", 1<<62)
	p.Step("uncontended", "raw 1/3")
	p.Step("uncontended", "raw 2/3")
	p.Step("parallel", "raw 1/3")
	if n := strings.Count(b.String(), "\n"); n != 2 {
		t.Errorf("throttled: %d lines, want one per topic: %q", n, b.String())
	}
}

// TestPerfHold: the hotkey tables and charts say the hold the run used
// (hold_ms), and say none for a run recorded without it.
func TestPerfHold(t *testing.T) {
	rows := func(hold *float64) *Perf {
		return &Perf{Header: Header{Command: "go run ./bench perf"},
			Results:  []Result{{Lock: "lease", Scenario: "hotkey", Workers: 8, HoldMs: hold, OpsPerSec: Ptr(1500), MinShare: Ptr(0.1), MaxShare: Ptr(0.15)}},
			Ceilings: []Result{{Lock: "time.Sleep", Scenario: "hotkey", HoldMs: hold, OpsPerSec: Ptr(1900), P50us: Ptr(520)}}}
	}
	for _, c := range []struct {
		hold       *float64
		text, html []string
	}{
		{Ptr(0.5), []string{"each holding the lock 0.5 ms", "time.Sleep(500µs) alone"}, []string{"8 workers, one key, 0.5 ms held"}},
		{nil, []string{"each holding the lock a while", "time.Sleep of the hold alone"}, []string{"8 workers, one key · "}},
	} {
		rep := rows(c.hold)
		var out bytes.Buffer
		WritePerfTable(&out, rep)
		text := strings.Join(strings.Fields(out.String()), " ")
		for _, s := range c.text {
			if !strings.Contains(text, s) {
				t.Errorf("hold %v: the table lacks %q:\n%s", c.hold, s, out.String())
			}
		}
		if strings.Contains(text, "1 ms") || strings.Contains(text, "1ms") {
			t.Errorf("hold %v: the table says 1 ms:\n%s", c.hold, out.String())
		}
		page := perfHTML(t, rep)
		for _, s := range c.html {
			if !bytes.Contains(page, []byte(s)) {
				t.Errorf("hold %v: the HTML lacks %q", c.hold, s)
			}
		}
	}
}

// TestPerfParallelWorkers: the parallel table says the goroutines the run
// used (workers).
func TestPerfParallelWorkers(t *testing.T) {
	rep := &Perf{Header: Header{Command: "go run ./bench perf"},
		Results: []Result{{Lock: "lease", Scenario: "parallel", Workers: 32, OpsPerSec: Ptr(9000)}}}
	var out bytes.Buffer
	WritePerfTable(&out, rep)
	if !strings.Contains(out.String(), "per second, 32 goroutines") {
		t.Errorf("the parallel table does not say 32 goroutines:\n%s", out.String())
	}
}
