//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRunOncePer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := lockName(t)
	ran := "echo ran >> " + filepath.Join(dir, "runs")
	r := fl(t, "", on("run", "--once-per", "1h", name, "--", "sh", "-c", ran)...)
	if r.code != exitOK {
		t.Fatalf("first run: exit %d, want 0", r.code)
	}
	r = fl(t, "", on("run", "--once-per", "1h", name, "--", "sh", "-c", ran)...)
	if r.code != exitDone || !strings.Contains(r.stderr, "already done this period") {
		t.Fatalf("second run: exit %d, stderr %q; want %d and why", r.code, r.stderr, exitDone)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "runs")); string(b) != "ran\n" {
		t.Fatalf("the command ran %q, want once", b)
	}
	if v := inspectJSON(t, on(name)...); v.Held {
		t.Fatalf("after a run that was done: %+v, want the lock released", v)
	}
}

// TestRunOncePerFailedRunStaysOpen: a command that fails does not complete
// the period; the next run runs it again.
func TestRunOncePerFailedRunStaysOpen(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	if r := fl(t, "", on("run", "--once-per", "1h", name, "--", "sh", "-c", "exit 7")...); r.code != 7 {
		t.Fatalf("failing run: exit %d, want 7", r.code)
	}
	if r := fl(t, "", on("run", "--once-per", "1h", name, "--", "true")...); r.code != exitOK {
		t.Fatalf("run after a failure: exit %d, want 0", r.code)
	}
	if r := fl(t, "", on("run", "--once-per", "1h", name, "--", "true")...); r.code != exitDone {
		t.Fatalf("run after a success: exit %d, want %d", r.code, exitDone)
	}
}

// TestRunOncePerThreeHosts: three runs started at once, waiting for the
// lock: the command runs once, the two others exit 6.
func TestRunOncePerThreeHosts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := lockName(t)
	job := "echo $FENCE_SEQ >> " + filepath.Join(dir, "runs") + "; sleep 0.3"
	var ps []*proc
	for range 3 {
		ps = append(ps, start(t, "", on("run", "--wait", "10s", "--once-per", "1h", name, "--", "sh", "-c", job)...))
	}
	codes := map[int]int{}
	for _, p := range ps {
		codes[p.wait(t).code]++
	}
	if codes[exitOK] != 1 || codes[exitDone] != 2 {
		t.Fatalf("exit statuses %v, want one 0 and two %d", codes, exitDone)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "runs")); strings.Count(string(b), "\n") != 1 {
		t.Fatalf("the command ran %q, want once", b)
	}
}

func TestRunOncePerUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		on("run", "--once-per", "-1h", "x", "--", "true"),
		on("run", "--once-per", "soon", "x", "--", "true"),
		{"--redis", "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3", "run", "--once-per", "1h", "x", "--", "true"},
	} {
		if r := fl(t, "", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}

// TestRunOncePerPausedHolder: fencelock is stopped (SIGSTOP) past its ttl
// while its command runs; a second run takes the lock, runs the command
// and completes the period. The paused run, resumed, exits 4 and does not
// mark the period; a third run finds it done.
func TestRunOncePerPausedHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := lockName(t)
	runs := filepath.Join(dir, "runs")
	first := start(t, dir, on("run", "--ttl", "1s", "--grace", "5s", "--once-per", "1h", name, "--", "sh", "-c",
		`echo first >> runs; echo > started; while [ ! -f go ]; do sleep 0.05; done`)...)
	waitFile(t, filepath.Join(dir, "started"))
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r := fl(t, dir, on("run", "--wait", "10s", "--once-per", "1h", name, "--", "sh", "-c", "echo second >> runs")...)
	if r.code != exitOK {
		t.Fatalf("the run that took over: exit %d, want 0", r.code)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := first.wait(t); r.code != exitLost {
		t.Fatalf("the paused run: exit %d, want %d", r.code, exitLost)
	}
	if r := fl(t, dir, on("run", "--once-per", "1h", name, "--", "sh", "-c", "echo third >> runs")...); r.code != exitDone {
		t.Fatalf("a run after the takeover: exit %d, want %d", r.code, exitDone)
	}
	if b, _ := os.ReadFile(runs); string(b) != "first\nsecond\n" {
		t.Fatalf("the commands ran %q, want the paused one and the takeover", b)
	}
}
