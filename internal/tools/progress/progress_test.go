package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// testdata/sample.json is `go test -json ./...` over five packages: a slow
// one that passes (a), a fast one (b), one with a failing subtest (c), one
// that does not build (d), one without tests (e).
func TestSample(t *testing.T) {
	in, err := os.ReadFile("testdata/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(bytes.NewReader(in), &out, false, 0); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	progress, summary, ok := strings.Cut(got, "5 packages done; summary:\n")
	if !ok {
		t.Fatalf("no summary line:\n%s", got)
	}
	// Results as they finish: b before a, which was slow.
	if b, a := strings.Index(progress, "ok  \tjt/b"), strings.Index(progress, "ok  \tjt/a"); b < 0 || a < b {
		t.Errorf("progress: want jt/b's result before jt/a's:\n%s", progress)
	}
	for _, want := range []string{"  |     c_test.go:3: boom\n", "FAIL\tjt/c\t", "d/d_test.go:3:27: undefined: undefined\n"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
	for l := range strings.Lines(progress) {
		if strings.HasPrefix(l, "ok") || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "--- ") {
			t.Errorf("progress line %q would pass for one of go test's own", l)
		}
	}
	// The summary is plain go test's, in package order.
	want := `# jt/d [jt/d.test]
d/d_test.go:3:27: undefined: undefined
ok  	jt/a	0.305s
ok  	jt/b	0.004s
    c_test.go:3: detail
    c_test.go:3: boom
--- FAIL: TestBad/no (0.00s)
--- FAIL: TestBad (0.00s)
FAIL
FAIL	jt/c	0.004s
FAIL	jt/d [build failed]
?   	jt/e	[no test files]
FAIL
`
	if summary != want {
		t.Errorf("summary:\n%s\nwant:\n%s", summary, want)
	}
}

func TestPassingRunEndsWithoutFAIL(t *testing.T) {
	in := `{"Action":"start","Package":"x"}
{"Action":"output","Package":"x","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"x","Test":"TestA","Output":"    x_test.go:9: a log line\n"}
{"Action":"output","Package":"x","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"x","Test":"TestA"}
{"Action":"output","Package":"x","Output":"PASS\n"}
{"Action":"output","Package":"x","Output":"ok  \tx\t0.01s\n"}
{"Action":"pass","Package":"x"}
`
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, false, 0); err != nil {
		t.Fatal(err)
	}
	_, summary, _ := strings.Cut(out.String(), "summary:\n")
	if summary != "ok  \tx\t0.01s\n" {
		t.Errorf("summary %q, want only the ok line", summary)
	}
	out.Reset()
	if err := run(strings.NewReader(in), &out, true, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "a log line") {
		t.Errorf("-v dropped a passing test's log:\n%s", out.String())
	}
}

func TestUnfinishedPackageFails(t *testing.T) {
	in := `{"Action":"start","Package":"x"}
{"Action":"output","Package":"x","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"x","Test":"TestA","Output":"working\n"}
`
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, false, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "working\nFAIL\tx [no result: go test ended first]\nFAIL\n") {
		t.Errorf("unfinished package:\n%s", out.String())
	}
}

func TestPassingPackageShowsItsStatusLineAlone(t *testing.T) {
	in := `{"Action":"start","Package":"x"}
{"Action":"output","Package":"x","Output":"testing: warning: no tests to run\n"}
{"Action":"output","Package":"x","Output":"PASS\n"}
{"Action":"output","Package":"x","Output":"ok  \tx\t0.01s [no tests to run]\n"}
{"Action":"pass","Package":"x"}
`
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, false, 0); err != nil {
		t.Fatal(err)
	}
	_, summary, _ := strings.Cut(out.String(), "summary:\n")
	if summary != "ok  \tx\t0.01s [no tests to run]\n" {
		t.Errorf("summary %q, want only the ok line", summary)
	}
}

func TestStamp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for d, want := range map[time.Duration]string{
		0: "[     0s] ", 59 * time.Second: "[    59s] ", 62 * time.Second: "[  1m02s] ", 125 * time.Minute: "[125m00s] ",
	} {
		now := t0
		f := newFilter(io.Discard, false, func() time.Time { return now })
		now = t0.Add(d)
		if got := f.stamp(); got != want {
			t.Errorf("stamp after %s: %q, want %q", d, got, want)
		}
	}
}
