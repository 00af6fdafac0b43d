package perf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/bench/internal/report"
)

// targetsByName checks rs's targets and returns them by name.
func targetsByName(rs []report.Result) map[string]report.Target {
	got := map[string]report.Target{}
	for _, tg := range targets(rs, nil) {
		got[tg.Name] = tg
	}
	return got
}

// wakeRow is a wake result with per-round p50s and an overall p50.
func wakeRow(lock string, p50us float64, rounds ...float64) report.Result {
	return report.Result{Lock: lock, Scenario: "wake", P50us: report.Ptr(p50us), PerRound: report.Figures(rounds)}
}

// TestTargetsWakePeerAtZero: a peer whose waiter had the lock before the
// release returned (p50 0) gives no ratio; the wake targets judge it
// directly, and a ratio of the one round left is never taken for the run.
// The JSON of the paired results can be written (no +Inf).
func TestTargetsWakePeerAtZero(t *testing.T) {
	const vsBest = "lease wake p50 ≤ best peer"
	for _, c := range []struct {
		name       string
		lease, rs1 report.Result
		want       string
		measured   string
	}{
		{"peer at 0 in 3 of 4 rounds", wakeRow("lease", 100, 100, 100, 100, 100), wakeRow("redsync-1", 0, 0, 900, 0, 0), report.VerdictMissed, "before the release returned"},
		{"peer at 0 in every round", wakeRow("lease", 100, 100, 100, 100, 100), wakeRow("redsync-1", 0, 0, 0, 0, 0), report.VerdictMissed, "lease 100.0 µs after the release"},
		{"both at 0", wakeRow("lease", 0, 0, 0, 0, 0), wakeRow("redsync-1", 0, 0, 0, 0, 0), report.VerdictMet, "both had the lock before"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := []report.Result{c.lease, c.rs1, wakeRow("rueidislock", 300, 300, 300, 300, 300), wakeRow("redislock", 0, 0, 0, 0, 0)}
			pairUp(rs, p50, true)
			got := targetsByName(rs)
			for _, name := range []string{vsBest, "lease wake ≥ 20× faster than redislock", "lease wake ≥ 200× faster than redsync-1"} {
				tg := got[name]
				if tg.Verdict() != c.want || !strings.Contains(tg.Measured, c.measured) {
					t.Errorf("%s: %s (%s), want %s (%q)", name, tg.Verdict(), tg.Measured, c.want, c.measured)
				}
			}
			rep := report.Perf{Results: rs, Targets: targets(rs, nil)}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("JSON: %v", err)
			}
		})
	}
}

// TestTargetsPairsCounted: the measured text gives the number of rounds
// that paired, not the rounds of the first lock; with most rounds
// unpaired it falls back to the run's figures.
func TestTargetsPairsCounted(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		peer report.Result
		want string
	}{
		{wakeRow("rueidislock", 200, 200, nan, 200, 200), "0.50×, median of 3 paired rounds"},
		{wakeRow("rueidislock", 200, nan, nan, nan, 200), "0.50×, ratio of the run's figures"},
	} {
		got := targetsByName([]report.Result{wakeRow("lease", 100, 100, 100, 100, 100), c.peer})
		if tg := got["lease wake p50 ≤ best peer"]; tg.Verdict() != report.VerdictMet || !strings.HasPrefix(tg.Measured, c.want) {
			t.Errorf("%v: %s (%s), want met (%s)", c.peer.PerRound, tg.Verdict(), tg.Measured, c.want)
		}
	}
}

// TestTargetsWakeBelow500: "< 500 µs" is strict.
func TestTargetsWakeBelow500(t *testing.T) {
	for _, c := range []struct {
		p50  float64
		want string
	}{{499.9, report.VerdictMet}, {500, report.VerdictMissed}} {
		tg := targetsByName([]report.Result{wakeRow("lease", c.p50)})["lease wake p50 < 500 µs"]
		if tg.Verdict() != c.want {
			t.Errorf("p50 %v µs: %s (%s), want %s", c.p50, tg.Verdict(), tg.Measured, c.want)
		}
	}
}

// TestTargetsRedlockWaiters: the redlock waiters targets are n/a without
// redsync-5's figure, and judged on it when there is one.
func TestTargetsRedlockWaiters(t *testing.T) {
	row := func(lock string, acquired int, ms *float64) report.Result {
		return report.Result{Lock: lock, Scenario: "waiters", Workers: 100, Keys: 10, Samples: acquired, AllAcquiredMs: ms}
	}
	const name = "redlock-3 waiters: all acquired, no slower than redsync-5"
	for _, c := range []struct {
		name     string
		rs       []report.Result
		want     string
		measured string
	}{
		{"redsync-5 not run", []report.Result{row("redlock-3", 100, report.Ptr(50))}, report.VerdictNA, "redsync-5 not measured"},
		{"redsync-5 not all acquired", []report.Result{row("redlock-3", 100, report.Ptr(50)), row("redsync-5", 90, nil)}, report.VerdictNA, "redsync-5 not measured"},
		{"no slower", []report.Result{row("redlock-3", 100, report.Ptr(50)), row("redsync-5", 100, report.Ptr(60))}, report.VerdictMet, "redsync-5 in 60 ms"},
		{"slower", []report.Result{row("redlock-3", 100, report.Ptr(70)), row("redsync-5", 100, report.Ptr(60))}, report.VerdictMissed, "redsync-5 in 60 ms"},
		{"not all acquired", []report.Result{row("redlock-3", 90, nil)}, report.VerdictMissed, "90 of 100 acquired"},
	} {
		tg := targetsByName(c.rs)[name]
		if tg.Verdict() != c.want || !strings.Contains(tg.Measured, c.measured) {
			t.Errorf("%s: %s (%s), want %s (%q)", c.name, tg.Verdict(), tg.Measured, c.want, c.measured)
		}
	}
}

// TestTargetsDatabasePaired: the database targets and the ×unguarded
// column are the medians of the paired rounds, not the ratio of the whole
// p50s (here 1.10, under the limit, while the rounds say 1.25).
func TestTargetsDatabasePaired(t *testing.T) {
	rs := []report.Result{
		{Lock: "postgres", Scenario: "pg_unguarded", P50us: report.Ptr(100), PerRound: report.Figures{100, 100, 100}},
		{Lock: "postgres", Scenario: "pg_guarded", P50us: report.Ptr(110), PerRound: report.Figures{125, 130, 90}},
	}
	tg := targetsByName(rs)["pg_guarded p50 ≤ 1.2× pg_unguarded"]
	if tg.Verdict() != report.VerdictMissed || tg.Ratio == nil || *tg.Ratio != 1.25 ||
		!strings.Contains(tg.Measured, "median of 3 paired rounds (pg_guarded 110.0 µs, pg_unguarded 100.0 µs)") {
		t.Errorf("pg_guarded: %s %v (%s), want MISSED 1.25 of 3 paired rounds", tg.Verdict(), tg.Ratio, tg.Measured)
	}
	var out bytes.Buffer
	report.WritePerfTable(&out, &report.Perf{Results: rs})
	if !regexp.MustCompile(`postgres\s+pg_guarded\s.*\s1\.25\s`).MatchString(out.String()) {
		t.Errorf("the table's ×unguarded is not the paired 1.25:\n%s", out.String())
	}
}

// TestREADMEDatabaseTargets: bench/README.md states each database target
// once, with the limit targets checks.
func TestREADMEDatabaseTargets(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "**Targets**")
	sec, _, _ = strings.Cut(sec, "\n## ")
	sec = strings.Join(strings.Fields(sec), " ")
	seen := map[string]bool{}
	for _, tg := range targets(nil, nil) {
		scen, _, _ := strings.Cut(tg.Name, " ")
		if !strings.HasPrefix(scen, "pg_") && !strings.HasPrefix(scen, "sql_") || seen[scen] {
			continue
		}
		seen[scen] = true
		want := fmt.Sprintf("`%s` ≤ %g×", scen, tg.Limit)
		if n := strings.Count(sec, "`"+scen+"` ≤"); n != 1 || !strings.Contains(sec, want) {
			t.Errorf("README's targets state %q %d times, want once as %q", scen, n, want)
		}
	}
	if len(seen) != 4 {
		t.Errorf("database targets %v, want pg_guarded, pg_perrow, sql_guarded, sql_perrow", seen)
	}
}
