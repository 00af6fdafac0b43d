//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// stubbornChild is a command that writes its pid (its process group's id)
// to the file pid and ignores SIGTERM.
const stubbornChild = `echo $$ > pid.tmp && mv pid.tmp pid; trap "" TERM; sleep 60`

// childGroup waits for stubbornChild's pid file in dir and returns its
// process group, which the test kills when it ends (whatever fencelock did).
func childGroup(t *testing.T, dir string) int {
	t.Helper()
	pgid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	if len(groupRunning(t, pgid)) == 0 {
		t.Fatal("the command is not running")
	}
	return pgid
}

// waitGroupGone waits until process group pgid no longer runs, and fails
// the test if it still runs at by.
func waitGroupGone(t *testing.T, pgid int, by time.Time, what string) {
	t.Helper()
	for len(groupRunning(t, pgid)) > 0 {
		if time.Now().After(by) {
			t.Fatalf("the command's process group %d %v still runs %s", pgid, groupRunning(t, pgid), what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunSuddenLossKillsBeforeDeadline: when the lock vanishes from Redis
// (an operator deleted it, a restart or failover lost it), the next
// refresh finds it gone and the lease ends at once, with most of its local
// deadline still ahead. run cuts --grace (30s here) so that SIGKILL lands
// before that deadline, even for a command that ignores SIGTERM, and exits
// with status 4. Before, the command got the full --grace: 30s in which
// the next holder could run beside it.
func TestRunSuddenLossKillsBeforeDeadline(t *testing.T) {
	t.Parallel()
	const ttl, grace = 2 * time.Second, 30 * time.Second
	name := lockName(t)
	dir := t.TempDir()
	begin := time.Now()
	p := start(t, dir, on("run", "--ttl", ttl.String(), "--grace", grace.String(), name, "--", "sh", "-c", stubbornChild)...)
	pgid := childGroup(t, dir)
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if n, err := rdb.Del(t.Context(), "fencelock:{"+name+"}").Result(); err != nil || n != 1 {
		t.Fatalf("deleting the lock key: %d, %v", n, err)
	}
	// The refresh that finds the lock gone comes within ttl/3; the lease's
	// local deadline is then at most a ttl later. Allow a busy machine
	// more: what matters is that the command does not get its 30s.
	waitGroupGone(t, pgid, begin.Add(2*ttl+slack), "well past the lease's deadline, inside the --grace it was given")
	t.Logf("the command's process group was gone %v after start", time.Since(begin).Round(time.Millisecond))
	res := p.wait(t)
	if res.code != exitLost {
		t.Fatalf("exit %d, want %d (lease lost)", res.code, exitLost)
	}
	if !strings.Contains(res.stderr, "lost while the command ran") || !strings.Contains(res.stderr, "shortened to 100ms: the lock may already have another holder") {
		t.Errorf("stderr %q does not say that the lease was lost and --grace shortened to the margin", res.stderr)
	}
}

// TestRunLossPastDeadlineShortGrace: a lease found lost after its local
// deadline has passed (fencelock itself was paused past it: the lock may
// already have another holder) gives a command that ignores SIGTERM only
// the margin (100ms), not --grace (30s), before SIGKILL.
func TestRunLossPastDeadlineShortGrace(t *testing.T) {
	t.Parallel()
	const ttl, grace = time.Second, 30 * time.Second
	dir := t.TempDir()
	p := start(t, dir, on("run", "--ttl", ttl.String(), "--grace", grace.String(), lockName(t), "--", "sh", "-c", stubbornChild)...)
	pgid := childGroup(t, dir)
	// Pause fencelock (not the command) past its ttl: the lock expires in
	// Redis, and fencelock sees the lease lost only when it resumes.
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2*ttl + ttl/2)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	waitGroupGone(t, pgid, resumed.Add(slack), "after fencelock resumed past the lease's deadline")
	t.Logf("the command's process group was gone %v after fencelock resumed", time.Since(resumed).Round(time.Millisecond))
	res := p.wait(t)
	if res.code != exitLost {
		t.Fatalf("exit %d, want %d (lease lost)", res.code, exitLost)
	}
	if !strings.Contains(res.stderr, "shortened to 100ms") {
		t.Errorf("stderr %q does not say that --grace was shortened to the margin", res.stderr)
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

func TestLostGrace(t *testing.T) {
	for _, tc := range []struct{ ttl, grace, g time.Duration }{
		{30 * time.Second, 10 * time.Second, 100 * time.Millisecond}, // defaults: the margin
		{2 * time.Second, 30 * time.Second, 100 * time.Millisecond},
		{2 * time.Second, 50 * time.Millisecond, 50 * time.Millisecond},   // --grace shorter than the margin
		{500 * time.Millisecond, 30 * time.Second, 50 * time.Millisecond}, // margin ttl/10
		{2 * time.Second, 0, 0},
	} {
		if g := lostGrace(tc.ttl, tc.grace); g != tc.g {
			t.Errorf("lostGrace(%v, %v) = %v; want %v", tc.ttl, tc.grace, g, tc.g)
		}
	}
}
