//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// TestRunPermitsAtMostN is issue 32's test: 10 shell loops, started at
// once, each running `fencelock run --permits 3` five times, never run more
// than 3 commands at once, and do reach 3. The count comes from what the
// commands themselves write: each appends a start line once it runs and an
// end line before it exits, one short O_APPEND write each, so the log's
// order is the order of the writes, and k starts without their ends at
// some point of it are k commands that ran at once. Each slot's commands
// must not overlap either, and its tokens must grow.
func TestRunPermitsAtMostN(t *testing.T) {
	t.Parallel()
	const loops, runs, n = 10, 5, 3
	name := lockName(t)
	dir := t.TempDir()
	inner := `echo "start $FENCE_SLOT $FENCE_SEQ $FENCE_KEY" >> log; sleep 0.5; echo "end $FENCE_SLOT $FENCE_SEQ $FENCE_KEY" >> log`
	loop := `while [ ! -f go ]; do sleep 0.01; done
for i in 1 2 3 4 5; do
	fencelock run --permits 3 --wait 3m "$NAME" -- sh -c '` + inner + `' || echo "exit $?" >> failures
done`
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "REDIS_URL="+redisURL, "NAME="+name)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var shells []*exec.Cmd
	for range loops {
		c := exec.CommandContext(ctx, "sh", "-c", loop)
		c.Dir, c.Env = dir, env
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		require.NoError(t, c.Start())
		shells = append(shells, c)
	}
	began := time.Now()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o644))
	for _, c := range shells {
		require.NoError(t, c.Wait())
	}
	took := time.Since(began)
	if b, err := os.ReadFile(filepath.Join(dir, "failures")); err == nil {
		t.Fatalf("runs that failed:\n%s", b)
	}
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	require.NoError(t, err)

	running, most, starts, ends := 0, 0, 0, 0
	holds := map[int]uint64{}   // slot -> Seq of the command that holds it
	lastSeq := map[int]uint64{} // slot -> Seq of its last command
	for i, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 4, "log line %d: %q", i+1, line)
		slot, err := strconv.Atoi(f[1])
		require.NoError(t, err, "log line %d: %q: FENCE_SLOT", i+1, line)
		seq, err := strconv.ParseUint(f[2], 10, 64)
		require.NoError(t, err, "log line %d: %q: FENCE_SEQ", i+1, line)
		require.True(t, slot >= 0 && slot < n, "log line %d: %q: slot out of 0..%d", i+1, line, n-1)
		require.Equal(t, lease.PermitName(name, slot), f[3], "log line %d: FENCE_KEY", i+1)
		switch f[0] {
		case "start":
			starts++
			running++
			most = max(most, running)
			_, held := holds[slot]
			require.False(t, held, "log line %d: %q: slot %d's commands overlap", i+1, line, slot)
			require.Greater(t, seq, lastSeq[slot], "log line %d: %q: slot %d's tokens must grow", i+1, line, slot)
			holds[slot], lastSeq[slot] = seq, seq
		case "end":
			ends++
			running--
			require.Equal(t, holds[slot], seq, "log line %d: %q: the end of a command that did not start", i+1, line)
			delete(holds, slot)
		default:
			t.Fatalf("log line %d: %q", i+1, line)
		}
	}
	t.Logf("%d loops of %d runs with --permits %d: at most %d commands at once, %d ran, in %v", loops, runs, n, most, starts, took.Round(time.Millisecond))
	assert.Equal(t, loops*runs, starts, "every command ran")
	assert.Equal(t, loops*runs, ends, "every command ended")
	assert.LessOrEqual(t, most, n, "more commands than permits ran at once")
	assert.Equal(t, n, most, "the permits were never all used at once")
}

// TestRunPermitKilled: a `run --permits` whose fencelock is killed
// (SIGKILL: no release, no keep-alive) while its command runs frees its
// permit when its ttl ends, for another run, which gets the slot with a
// greater token.
func TestRunPermitKilled(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	otherDir := t.TempDir()
	other, _ := holder(t, otherDir, on("run", "--permits", "2", name)...)
	dir := t.TempDir()
	k := start(t, dir, on("run", "--permits", "2", "--ttl", "2s", name, "--", "sh", "-c",
		`echo "$$ $FENCE_SLOT $FENCE_SEQ" > info.tmp && mv info.tmp info; exec sleep 60`)...)
	f := strings.Fields(waitFile(t, filepath.Join(dir, "info")))
	require.Len(t, f, 3)
	child, err := strconv.Atoi(f[0])
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(-child, syscall.SIGKILL) }) // its own process group
	slot, seq := f[1], f[2]

	r := fl(t, "", on("run", "--permits", "2", name, "--", "true")...)
	require.Equal(t, exitNotAcquired, r.code, "both permits are held")

	require.NoError(t, k.cmd.Process.Kill())
	k.wait(t)
	began := time.Now()
	// --wait 6s: the killed run's key lives at most its ttl (2s) after its
	// last refresh; the other permit is held for 30s and refreshed.
	r = fl(t, "", on("run", "--permits", "2", "--wait", "6s", name, "--", "sh", "-c", `echo "$FENCE_SLOT $FENCE_SEQ"`)...)
	t.Logf("the killed run's permit was taken again %v after the kill", time.Since(began).Round(time.Millisecond))
	require.Equal(t, exitOK, r.code, "the killed run's permit is free after its ttl")
	got := strings.Fields(r.stdout)
	require.Len(t, got, 2)
	assert.Equal(t, slot, got[0], "the killed run's slot")
	prev, _ := strconv.ParseUint(seq, 10, 64)
	next, err := strconv.ParseUint(got[1], 10, 64)
	require.NoError(t, err)
	assert.Greater(t, next, prev, "the slot's next token")

	require.NoError(t, os.WriteFile(filepath.Join(otherDir, "stop"), nil, 0o644))
	assert.Equal(t, exitOK, other.wait(t).code)
}

// TestRunPermitEnv: a permit's command gets its slot's token (key
// NAME#SLOT) and FENCE_SLOT; a lock's command gets no FENCE_SLOT, not even
// one from fencelock's own environment (a run inside a run --permits).
func TestRunPermitEnv(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	r := fl(t, "", on("run", "--permits", "2", name, "--", "sh", "-c", printToken+` "$FENCE_SLOT"`)...)
	require.Equal(t, exitOK, r.code)
	f := strings.Fields(r.stdout)
	require.Len(t, f, 5)
	tok := parseRunOutput(t, strings.Join(f[:4], " "), lease.PermitName(name, 0))
	assert.Equal(t, "0", f[4], "FENCE_SLOT of the first permit")
	assert.NoError(t, tok.Validate())

	p := startWith(t, "", append(os.Environ(), "REDIS_URL=", "FENCE_SLOT=7"), on("run", name, "--", "sh", "-c", `echo "[$FENCE_SLOT] $FENCE_KEY"`)...)
	r = p.wait(t)
	require.Equal(t, exitOK, r.code)
	assert.Equal(t, "[] "+name, strings.TrimSpace(r.stdout))
}

// TestPermitsRefused: --permits needs one Redis deployment: with Redlock's
// several --redis servers it is a usage error, before any connection
// (these refuse connections: a try would exit 1).
func TestPermitsRefused(t *testing.T) {
	t.Parallel()
	nodes := fmt.Sprintf("redis://%s/0,redis://%s/0,redis://%s/0", testenv.ClosedAddr(t), testenv.ClosedAddr(t), testenv.ClosedAddr(t))
	for _, args := range [][]string{
		{"--redis", nodes, "run", "--permits", "2", "x", "--", "true"},
		{"--redis", nodes, "inspect", "--permits", "2", "x"},
	} {
		r := fl(t, "", args...)
		assert.Equal(t, exitUsage, r.code, "%q", args)
		assert.Contains(t, r.stderr, "--permits needs one Redis deployment", "%q", args)
	}
}

// TestInspectPermits: with 3 runs holding the 3 permits and 2 waiting,
// inspect --permits shows the 3 holders (slot, holder, token, ttl, the
// slot's counter) and the queue of 2; the waiters then get the permits.
func TestInspectPermits(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	var holders []*proc
	var dirs []string
	tokens := map[string]fence.Token{}
	for range 3 {
		dir := t.TempDir()
		h, text := holder(t, dir, on("run", "--permits", "3", name)...)
		tok, err := fence.Parse(text)
		require.NoError(t, err)
		holders, dirs, tokens[text] = append(holders, h), append(dirs, dir), tok
	}
	var waiters []*proc
	for range 2 {
		waiters = append(waiters, start(t, t.TempDir(), on("run", "--permits", "3", "--wait", "30s", name, "--", "sh", "-c", `echo "$FENCE_SLOT"`)...))
	}

	var v semView
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := fl(t, "", on("inspect", "--json", "--permits", "3", name)...)
		require.Equal(t, exitOK, r.code)
		v = semView{}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
		if v.Queue == 2 {
			break
		}
		require.False(t, time.Now().After(deadline), "the queue never had 2 waiters: %+v", v)
		time.Sleep(50 * time.Millisecond)
	}
	assert.Equal(t, "semaphore", v.Mode)
	assert.Equal(t, 3, v.Permits)
	assert.Equal(t, 3, v.ServerPermits)
	require.Len(t, v.Holders, 3)
	for i, h := range v.Holders {
		assert.Equal(t, i, h.Slot, "held slots, in order")
		tok, ok := tokens[h.Token]
		require.True(t, ok, "slot %d: token %s is none of the holders' %v", h.Slot, h.Token, tokens)
		assert.Equal(t, lease.PermitName(name, h.Slot), tok.Key)
		assert.Equal(t, tok.Holder, h.Holder)
		assert.Equal(t, tok.Seq, h.Seq)
		assert.Equal(t, tok.Seq, h.Counter, "the slot's counter: its holder's Seq")
		assert.True(t, h.TTLms > 0 && h.TTLms <= 30000, "slot %d: ttl %dms", h.Slot, h.TTLms)
	}
	require.Len(t, v.Waiters, 2)
	assert.NotEqual(t, v.Waiters[0], v.Waiters[1])

	r := fl(t, "", on("inspect", "--permits", "3", name)...)
	require.Equal(t, exitOK, r.code)
	for _, want := range []string{"semaphore " + name + "\n", "permits   3, 3 held\n", "\nqueue     2 (first " + strconv.Quote(v.Waiters[0]) + ", " + strconv.Quote(v.Waiters[1]) + ")\n"} {
		assert.Contains(t, r.stdout, want)
	}
	for _, h := range v.Holders {
		assert.Contains(t, r.stdout, fmt.Sprintf("slot %d    holder=%s token=%s ttl=", h.Slot, h.Holder, h.Token))
	}

	for i, h := range holders {
		require.NoError(t, os.WriteFile(filepath.Join(dirs[i], "stop"), nil, 0o644))
		assert.Equal(t, exitOK, h.wait(t).code)
	}
	for _, w := range waiters {
		r := w.wait(t)
		assert.Equal(t, exitOK, r.code)
		assert.Contains(t, []string{"0", "1", "2"}, strings.TrimSpace(r.stdout), "the waiter's FENCE_SLOT")
	}
	v = semView{}
	r = fl(t, "", on("inspect", "--json", "--permits", "3", name)...)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	assert.Empty(t, v.Holders, "all released")
	assert.Zero(t, v.Queue)
	if r := fl(t, "", on("inspect", "--permits", "3", name)...); !strings.Contains(r.stdout, "permits   3, 0 held\n") || !strings.HasSuffix(r.stdout, "queue     0\n") {
		t.Errorf("inspect of a free semaphore:\n%s", r.stdout)
	}
}
