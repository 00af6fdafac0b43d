package perf

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencelock/fencelock/bench/internal/report"
)

// loadRun reads a recorded `bench perf -json` run and checks its targets
// anew, as the run would now.
func loadRun(t *testing.T, name string) *report.Perf {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Perf
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	rep.Targets = targets(rep.Results, rep.Ceilings)
	return &rep
}

// wakeBeforeRelease makes lease's waiter have the lock before the
// holder's Release returned in every round, as on a quiet machine.
func wakeBeforeRelease(rep *report.Perf) {
	for i := range rep.Results {
		if r := &rep.Results[i]; r.Lock == "lease" && r.Scenario == "wake" {
			r.P50us, r.BeforeRelease = report.Ptr(0), r.Samples*3/4
			for j := range r.PerRound {
				r.PerRound[j] = 0
			}
		}
	}
}

// TestPerfTextReadable: the text report of recorded runs (today's main
// before interleaving, and a -quick run with rounds) fits 100 columns,
// leads with the questions and puts the targets after them, says a quick
// run's figures are noisy at the top, and never prints "0.0 µs": a wake
// before the release returned is said in words and its targets judged.
func TestPerfTextReadable(t *testing.T) {
	for _, name := range []string{"perf-baseline.json", "perf-full.json", "perf-quick.json", "perf-quick.json+wake0"} {
		t.Run(name, func(t *testing.T) {
			file, zero := strings.CutSuffix(name, "+wake0")
			rep := loadRun(t, file)
			if zero {
				wakeBeforeRelease(rep)
				rep.Targets = targets(rep.Results, rep.Ceilings)
			}
			var out bytes.Buffer
			report.WritePerfTable(&out, rep)
			text := out.String()
			lines := strings.Split(text, "\n")
			for i, l := range lines {
				if n := utf8.RuneCountInString(l); n > report.TextWidth {
					t.Errorf("line %d has %d columns: %q", i+1, n, l)
				}
			}
			first, tg := strings.Index(text, "How fast is a lock uncontended?"), strings.Index(text, "\nTargets")
			if first < 0 || tg < first {
				t.Errorf("the questions (at %d) should come before the targets (at %d)", first, tg)
			}
			for _, q := range []string{"How much does it do in parallel?", "How fair is it under contention?",
				"How fast does a waiter wake?", "waiters cost?", "What does the database guard cost?"} {
				if i := strings.Index(text, q); i < 0 || i > tg {
					t.Errorf("%q missing or after the targets", q)
				}
			}
			if regexp.MustCompile(`\b0\.0 ?µs`).MatchString(text) {
				t.Errorf("a 0.0 µs figure:\n%s", text)
			}
			if rep.Quick != strings.Contains(strings.Join(lines[:min(8, len(lines))], "\n"), "noisy: do not quote") {
				t.Errorf("quick=%v, but the top says otherwise:\n%s", rep.Quick, strings.Join(lines[:8], "\n"))
			}
			if !zero {
				return
			}
			if !strings.Contains(text, "before release returned") {
				t.Error("the wake before the release is not said in words")
			}
			for _, tg := range rep.Targets {
				if strings.HasPrefix(tg.Name, "lease wake") && tg.Verdict() != "met" {
					t.Errorf("%s: %s (%s), want met", tg.Name, tg.Verdict(), tg.Measured)
				}
			}
		})
	}
}

// TestPerfQuickPaired: the recorded -quick run has its figures per round,
// the paired ratios and the sleep ceilings, and the hotkey targets read
// the ceiling.
func TestPerfQuickPaired(t *testing.T) {
	rep := loadRun(t, "perf-quick.json")
	lease := report.Find(rep.Results, "lease", "uncontended")
	if lease == nil || len(lease.PerRound) != quickSizes.rounds || lease.VsRaw == nil || lease.VsBest == nil || lease.BestPeer == "" {
		t.Fatalf("lease uncontended lacks its rounds or paired ratios: %+v", lease)
	}
	if len(rep.Ceilings) != 2 {
		t.Fatalf("%d sleep ceilings, want 2", len(rep.Ceilings))
	}
	for _, tg := range rep.Targets {
		if strings.Contains(tg.Name, "sleep ceiling") && tg.Met == nil {
			t.Errorf("%s: no verdict (%s)", tg.Name, tg.Measured)
		}
	}
}

// TestPerfHTMLFits checks the HTML for what keeps it within 1200 px: no
// fixed width above it, text cells that wrap, and every table column a
// header; the real check is a browser (see bench/README.md).
func TestPerfHTMLFits(t *testing.T) {
	rep := loadRun(t, "perf-quick.json")
	wakeBeforeRelease(rep)
	path := filepath.Join(t.TempDir(), "perf.html")
	if err := report.WritePerfHTML(path, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, m := range regexp.MustCompile(`(?:[^-]width[:=]"?|min-width:)(\d+)(?:px)?`).FindAllStringSubmatch(page, -1) {
		if n, _ := strconv.Atoi(m[1]); n > 1200 {
			t.Errorf("fixed width %s wider than 1200 px", m[0])
		}
	}
	if !regexp.MustCompile(`\.wrap\{[^}]*white-space:normal`).MatchString(page) {
		t.Error("the .wrap cells do not wrap")
	}
	// A cell with more than a few words must be allowed to wrap.
	for _, m := range regexp.MustCompile(`<td([^>]*)>([^<]*)</td>`).FindAllStringSubmatch(page, -1) {
		if strings.Count(m[2], " ") >= 4 && !strings.Contains(m[1], "wrap") {
			t.Errorf("a long cell that cannot wrap: <td%s>%s", m[1], m[2])
		}
	}
	for _, s := range []string{"How fast does a waiter wake?", "before release returned", "time.Sleep ceiling", "noisy: do not quote"} {
		if !strings.Contains(page, s) {
			t.Errorf("the HTML lacks %q", s)
		}
	}
	if strings.Index(page, ">Targets<") < strings.Index(page, "How fast is a lock uncontended?") {
		t.Error("the targets come before the questions")
	}
}

// TestInterleave: within each round every lock runs once, each round
// starting one lock further on, and each figure lands at its lock and
// round.
func TestInterleave(t *testing.T) {
	var order []string
	run := newRunner(&bytes.Buffer{}, true)
	figs := interleave(t.Context(), run, "test", 4, []string{"raw", "lease", "redislock"}, func(round, i int) float64 {
		order = append(order, strconv.Itoa(round)+[]string{"raw", "lease", "redislock"}[i])
		return float64(10*round + i)
	})
	want := "0raw 0lease 0redislock 1lease 1redislock 1raw 2redislock 2raw 2lease 3raw 3lease 3redislock"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	for i := range 3 {
		for r := range 4 {
			if figs[i][r] != float64(10*r+i) {
				t.Errorf("figs[%d][%d] = %v, want %d (figs %v)", i, r, figs[i][r], 10*r+i, figs)
			}
		}
	}
	rs := []report.Result{
		{Lock: "raw", Scenario: "parallel", OpsPerSec: report.Ptr(100), PerRound: report.Figures{100, 50, 200}},
		{Lock: "lease", Scenario: "parallel", OpsPerSec: report.Ptr(60), PerRound: report.Figures{90, 20, 100}},
		{Lock: "redislock", Scenario: "parallel", OpsPerSec: report.Ptr(80), PerRound: report.Figures{50, 50, 50}},
	}
	pairUp(rs, ops, false)
	// lease/raw per round: 0.9, 0.4, 0.5 → 0.5; lease/redislock: 1.8, 0.4, 2 → 1.8.
	if l := rs[1]; l.VsRaw == nil || *l.VsRaw != 0.5 || l.VsBest == nil || *l.VsBest != 1.8 || l.BestPeer != "redislock" {
		t.Errorf("lease paired: %+v", l)
	}
}
