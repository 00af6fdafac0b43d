package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPerfQuick runs the quick perf on two locks against a throwaway Redis
// (or REDIS_URL) and checks the shape of the JSON, the table and the HTML.
func TestPerfQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "perf.json"), filepath.Join(dir, "perf.html")
	var stdout, stderr bytes.Buffer
	err := perf(t.Context(), []string{"-quick", "-locks", "raw,lease", "-scenarios", "uncontended,parallel,wake,hotkey",
		"-json", jsonPath, "-html", htmlPath}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("perf: %v\n%s", err, stderr.String())
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	m, _ := rep["machine"].(map[string]any)
	for _, k := range []string{"cpus", "goos", "goarch", "go", "redis_server"} {
		if m[k] == nil || m[k] == "" {
			t.Errorf("machine.%s is missing: %v", k, m)
		}
	}
	if _, ok := rep["versions"].(map[string]any)["github.com/go-redsync/redsync/v4"]; !ok {
		t.Errorf("versions lack redsync: %v", rep["versions"])
	}
	if rep["timestamp"] == "" {
		t.Error("no timestamp")
	}

	var got struct{ Results []Result }
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	seen := map[string]Result{}
	for _, r := range got.Results {
		seen[r.Lock+"/"+r.Scenario] = r
	}
	want := map[string][]string{
		"raw/uncontended": {"p50", "p99"}, "lease/uncontended": {"p50", "p99"},
		"raw/parallel": {"ops"}, "lease/parallel": {"ops"},
		"lease/wake": {"p50", "p99"}, "lease/hotkey": {"ops", "share"},
	}
	for k, fields := range want {
		r, ok := seen[k]
		if !ok {
			t.Errorf("no result for %s", k)
			continue
		}
		if r.Errors > 0 {
			t.Errorf("%s: %d errors, first: %s", k, r.Errors, r.FirstErr)
		}
		for _, f := range fields {
			switch {
			case f == "p50" && (r.P50us == nil || *r.P50us <= 0),
				f == "p99" && (r.P99us == nil || *r.P99us < *r.P50us),
				f == "ops" && (r.OpsPerSec == nil || *r.OpsPerSec <= 0),
				f == "share" && (r.MinShare == nil || r.MaxShare == nil || *r.MinShare > *r.MaxShare):
				t.Errorf("%s: bad %s: %+v", k, f, r)
			}
		}
	}
	if r := seen["raw/wake"]; !r.Skipped || r.P50us != nil {
		t.Errorf("raw/wake should be skipped: %+v", r)
	}

	out := stdout.String()
	for _, s := range []string{"lock", "lease", "raw", "targets:"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("<svg")) || bytes.Contains(page, []byte("src=\"http")) || bytes.Contains(page, []byte("href=\"http")) {
		t.Error("the HTML should have inline SVG charts and no external assets")
	}
}
