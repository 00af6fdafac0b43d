//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// groupRunning returns the processes of process group pgid that are not
// zombies (a killed orphan may wait a while for init to reap it, but it
// no longer runs).
func groupRunning(t *testing.T, pgid int) []int {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestRunKillsBeforeDeadline: when the keep-alive's refreshes fail (Redis
// frozen), run stops the command early enough that SIGKILL, after a grace
// shortened to fit, lands before the lease's local deadline, even for a
// command that ignores SIGTERM; and exits with status 4. Before, SIGTERM
// came at the deadline and SIGKILL --grace (10s) after it: the command ran
// on while the lock could pass to another holder.
func TestRunKillsBeforeDeadline(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	dir := t.TempDir()
	const ttl = 3 * time.Second
	// The lease's deadline is at least the acquire's start + ttl − drift
	// (1% + 2ms), and the acquire starts after the process does. SIGKILL
	// is due 100ms before it; the test allows 100ms more for a busy
	// machine's late timers.
	begin := time.Now()
	deadline := begin.Add(ttl - ttl/100 - 2*time.Millisecond + 100*time.Millisecond)
	p := start(t, dir, "--redis", r.URL(), "run", "--ttl", ttl.String(), lockName(t), "--",
		"sh", "-c", `echo $$ > pid.tmp && mv pid.tmp pid; trap "" TERM; sleep 60`)
	pgid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	if err != nil {
		t.Fatal(err)
	}
	// Frozen before the first refresh (at ttl/3): no refresh succeeds.
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Resume() })
	if len(groupRunning(t, pgid)) == 0 {
		t.Fatal("the command is not running")
	}
	for len(groupRunning(t, pgid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the command's process group %d %v still runs at the lease's deadline (%v after start)",
				pgid, groupRunning(t, pgid), time.Since(begin).Round(time.Millisecond))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the command's process group was gone %v after start, %v before the deadline's lower bound",
		time.Since(begin).Round(time.Millisecond), (time.Until(deadline) - 100*time.Millisecond).Round(time.Millisecond))
	res := p.wait(t)
	if res.code != exitLost {
		t.Fatalf("exit %d, want %d (lease lost)", res.code, exitLost)
	}
	if !strings.Contains(res.stderr, "shortened") {
		t.Errorf("stderr %q does not say that --grace was shortened", res.stderr)
	}
}

// TestRunHealthyLeaseLongGrace: a --grace longer than half the ttl does not
// stop a command whose keep-alive succeeds.
func TestRunHealthyLeaseLongGrace(t *testing.T) {
	t.Parallel()
	if r := fl(t, "", on("run", "--ttl", "1s", "--grace", "5s", lockName(t), "--", "sleep", "2.5")...); r.code != 0 {
		t.Fatalf("exit %d, want 0: %s", r.code, r.stderr)
	}
}

func TestEndGame(t *testing.T) {
	for _, tc := range []struct {
		ttl, grace, term, g, margin time.Duration
	}{
		{30 * time.Second, 10 * time.Second, 10100 * time.Millisecond, 10 * time.Second, 100 * time.Millisecond}, // defaults: grace kept
		{3 * time.Second, 10 * time.Second, 1500 * time.Millisecond, 1400 * time.Millisecond, 100 * time.Millisecond},
		{3 * time.Second, 0, 100 * time.Millisecond, 0, 100 * time.Millisecond},
		{500 * time.Millisecond, time.Second, 250 * time.Millisecond, 200 * time.Millisecond, 50 * time.Millisecond},
	} {
		term, g, margin := endGame(tc.ttl, tc.grace)
		if term != tc.term || g != tc.g || margin != tc.margin {
			t.Errorf("endGame(%v, %v) = %v, %v, %v; want %v, %v, %v", tc.ttl, tc.grace, term, g, margin, tc.term, tc.g, tc.margin)
		}
	}
}
