package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestPerfServers: rows of a lock on another server (lease@valkey) get a
// table of their own with the paired ratio to the same lock on the first
// server, named as the header names it; a note heads the report; a run
// recorded with a bare redis_version still reads "redis 7.2.4".
func TestPerfServers(t *testing.T) {
	rep := &Perf{Header: Header{Command: "go run ./bench perf", Notes: []string{"valkey-server is not installed: the lease ran on redis only"},
		Machine: Machine{Redis: "redis 7.0.15", Others: []string{"valkey 8.0.1"}}},
		Results: []Result{
			{Lock: "lease", Scenario: "uncontended", P50us: Ptr(100), P99us: Ptr(200), PerRound: Figures{100, 100, 100}},
			{Lock: "lease@valkey", Scenario: "uncontended", P50us: Ptr(110), P99us: Ptr(300), PerRound: Figures{110, 120, 90}},
			{Lock: "lease", Scenario: "hotkey", Workers: 8, OpsPerSec: Ptr(700), MinShare: Ptr(0.12), MaxShare: Ptr(0.13), PerRound: Figures{700, 700, 700}},
			{Lock: "lease@valkey", Scenario: "hotkey", Workers: 8, OpsPerSec: Ptr(630), MinShare: Ptr(0.12), MaxShare: Ptr(0.13), PerRound: Figures{630, 700, 560}},
		}}
	var out bytes.Buffer
	WritePerfTable(&out, rep)
	text := out.String()
	for _, s := range []string{"redis 7.0.15, valkey 8.0.1", "valkey-server is not installed",
		"What does moving from redis to valkey cost?", "valkey ×redis"} {
		if !strings.Contains(text, s) {
			t.Errorf("the table lacks %q:\n%s", s, text)
		}
	}
	rows := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 5 && f[1] == "lease" && (f[0] == "uncontended" || f[0] == "hotkey") {
			rows[f[0]] = l
		}
	}
	// The medians of 1.1, 1.2, 0.9 and of 0.9, 1.0, 0.8.
	squash := func(l string) string { return strings.Join(strings.Fields(l), " ") }
	if !strings.Contains(squash(rows["uncontended"]), "100.0 110.0 1.10") || !strings.Contains(squash(rows["hotkey"]), "700 630 0.90") {
		t.Errorf("the rows lack the paired ratios:\n%s\n%s", rows["uncontended"], rows["hotkey"])
	}
	if page := perfHTML(t, rep); !bytes.Contains(page, []byte("id=server-valkey")) || !bytes.Contains(page, []byte("valkey-server is not installed")) {
		t.Error("the HTML lacks the valkey table or the note")
	}

	rep.Results = rep.Results[:1]
	out.Reset()
	WritePerfTable(&out, rep)
	if strings.Contains(out.String(), "What does moving") {
		t.Errorf("a table without rows on another server:\n%s", out.String())
	}
	if got := (&Header{Machine: Machine{Redis: "7.2.4"}}).facts(); got[3] != "redis 7.2.4" {
		t.Errorf("an old run's server: %q", got[3])
	}
}
