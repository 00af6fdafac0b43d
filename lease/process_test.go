package lease_test

// Tests with real separate processes (the test binary re-executed in a
// child mode, see processChild) and in-process tests of a waiter's timing
// and of a reply that arrives after its context ended.
//
// The keys and the channel are spelled out here (prefix "fencelock:"), as
// package lease documents them, so that these tests do not depend on the
// package that owns the protocol.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
)

// The child mode's environment.
const (
	procEnv      = "FENCELOCK_TEST_CHILD" // "waiter", or semaphore_process_test.go's "semcmd", "semloop"
	procAddrEnv  = "FENCELOCK_TEST_ADDR"  // Redis host:port
	procNameEnv  = "FENCELOCK_TEST_NAME"  // lock name
	procTTLEnv   = "FENCELOCK_TEST_TTL"   // Acquire's ttl
	procWaitEnv  = "FENCELOCK_TEST_WAIT"  // Acquire's context timeout
	procCloseEnv = "FENCELOCK_TEST_CLOSE" // "1": call Client.Close (if it exists) before exiting
	procExitEnv  = "FENCELOCK_TEST_EXIT"  // "1": exit(1) as soon as Acquire fails, as log.Fatal(err) does
)

// procReport is the one JSON line a waiter child prints when its Acquire
// returned.
type procReport struct {
	Err      string `json:"err,omitempty"`
	Held     bool   `json:"held"`      // the returned lease's Held(), read first
	Seq      uint64 `json:"seq"`       // its Token().Seq
	Holder   string `json:"holder"`    // its Holder()
	Deadline string `json:"deadline"`  // time until its Deadline()
	Redis    string `json:"redis"`     // the lock key's value, read right after
	HasClose bool   `json:"has_close"` // lease.Client has Close(ctx)
	CloseErr string `json:"close_err,omitempty"`
}

// processChild runs the child mode when the environment asks for it (the
// test binary re-executed by startProcChild) and reports whether it did.
func processChild() (int, bool) {
	mode := os.Getenv(procEnv)
	if mode == "" {
		return 0, false
	}
	if code, ok := semProcessChild(mode); ok { // semaphore_process_test.go's modes
		return code, true
	}
	if mode != "waiter" {
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", procEnv, mode)
		return 2, true
	}
	if err := procWaiterMain(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2, true
	}
	return 0, true
}

// procWaiterMain opens its own go-redis client and lease.Client, calls Acquire
// once and prints a procReport. It releases nothing.
func procWaiterMain() error {
	ttl, err := time.ParseDuration(os.Getenv(procTTLEnv))
	if err != nil {
		return err
	}
	wait, err := time.ParseDuration(os.Getenv(procWaitEnv))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(procAddrEnv), ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := lease.New(rdb)
	if err != nil {
		return err
	}
	n := os.Getenv(procNameEnv)

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	l, err := c.Acquire(ctx, n, ttl)
	cancel()
	if err != nil && os.Getenv(procExitEnv) == "1" {
		os.Exit(1)
	}
	var rep procReport
	if err != nil {
		rep.Err = err.Error()
	}
	if l != nil {
		rep.Held = l.Held() // first: what the caller would go by
		rep.Seq, rep.Holder = l.Token().Seq, l.Holder()
		rep.Deadline = time.Until(l.Deadline()).String()
	}
	gctx, gcancel := context.WithTimeout(context.Background(), 2*time.Second)
	v, gerr := rdb.Get(gctx, procLockKey(n)).Result()
	gcancel()
	switch {
	case errors.Is(gerr, redis.Nil):
		rep.Redis = "(free)"
	case gerr != nil:
		rep.Redis = "(GET: " + gerr.Error() + ")"
	default:
		rep.Redis = v
	}
	if os.Getenv(procCloseEnv) == "1" {
		// Client.Close(ctx) waits for the client's background cleanups (a
		// leaving waiter's removal from the queue). Behind an interface so
		// that this compiles on a lease package without it.
		if cl, ok := any(c).(interface{ Close(context.Context) error }); ok {
			rep.HasClose = true
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := cl.Close(cctx); err != nil {
				rep.CloseErr = err.Error()
			}
			ccancel()
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", b)
	return err
}

// procChild is a running waiter child.
type procChild struct {
	cmd    *exec.Cmd
	report chan procReport // its one line
	exited chan struct{}   // closed once it was reaped
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (c *procChild) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.Write(p)
}

func (c *procChild) errText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// startProcChild starts the test binary as a waiter child on the Redis at addr:
// it calls Acquire(ctx, name, ttl) with a context of wait.
func startProcChild(t *testing.T, addr, n string, ttl, wait time.Duration, closeClient bool) *procChild {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	c := &procChild{report: make(chan procReport, 1), exited: make(chan struct{})}
	c.cmd = exec.Command(exe, "-test.run=^$")
	c.cmd.Env = append(os.Environ(),
		procEnv+"=waiter", procAddrEnv+"="+addr, procNameEnv+"="+n,
		procTTLEnv+"="+ttl.String(), procWaitEnv+"="+wait.String(),
		procCloseEnv+"="+map[bool]string{true: "1", false: "0"}[closeClient])
	c.cmd.Stderr = c
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var rep procReport
			if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
				c.Write([]byte("stdout: " + sc.Text() + "\n"))
				continue
			}
			select {
			case c.report <- rep:
			default:
			}
		}
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Signal(syscall.SIGCONT)
			c.cmd.Process.Kill()
			<-c.exited
		}
		if s := c.errText(); s != "" {
			t.Logf("child %d stderr:\n%s", c.cmd.Process.Pid, s)
		}
	})
	return c
}

// waitReport waits for the child's report.
func (c *procChild) waitReport(t *testing.T, timeout time.Duration) procReport {
	t.Helper()
	select {
	case rep := <-c.report:
		return rep
	case <-c.exited:
		select {
		case rep := <-c.report:
			return rep
		default:
		}
		t.Fatalf("child exited (%v) without a report; stderr:\n%s", c.cmd.ProcessState, c.errText())
	case <-time.After(timeout):
		t.Fatalf("no report from the child within %v", timeout)
	}
	panic("unreachable")
}

// waitExit waits until the child was reaped.
func (c *procChild) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		t.Fatalf("child did not exit within %v", timeout)
	}
}

func procLockKey(n string) string    { return "fencelock:{" + n + "}" }
func procQueueKey(n string) string   { return procLockKey(n) + ":queue" }
func procChannel(n string) string    { return procLockKey(n) + ":release" }
func procHolderOf(v, id string) bool { return id != "" && (v == id || strings.HasPrefix(v, id+":")) }

// procQueue returns lock n's fair queue, head first.
func procQueue(t *testing.T, rdb redis.UniversalClient, n string) []string {
	t.Helper()
	m, err := rdb.ZRange(context.Background(), procQueueKey(n), 0, -1).Result()
	require.NoError(t, err)
	return m
}

// procWaitSubscribed waits until lock n's release channel has a subscriber.
func procWaitSubscribed(t *testing.T, rdb redis.UniversalClient, n string) {
	t.Helper()
	require.Eventually(t, func() bool {
		m, err := rdb.PubSubNumSub(context.Background(), procChannel(n)).Result()
		return err == nil && m[procChannel(n)] >= 1
	}, 10*time.Second, 2*time.Millisecond, "a waiter subscribed to %s", procChannel(n))
}

// procRedis starts a Redis of the test's own, whose address a child can
// use, and returns it with a client that honours contexts.
func procRedis(t *testing.T) (*testenv.Redis, *redis.Client) {
	t.Helper()
	r := testenv.NewRedis(t)
	opt := r.Options()
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return r, rdb
}

// TestProcessFrozenWaiterTwoHolders: a fair waiter W (another process) is
// frozen (SIGSTOP) while queued; the holder releases, which hands the lock
// to W; W's 1s ttl runs out while it is frozen, and X, waiting in this
// process, gets the lock; then W is thawed. W's Acquire must not return a
// lease that is Held() while X holds the lock: one handed to it before X
// took the lock (a token below X's), or while Redis holds X's id.
//
// After the thaw, W's Acquire may go on waiting; then X releases, and W's
// lease, from that release, must carry a token above X's.
func TestProcessFrozenWaiterTwoHolders(t *testing.T) {
	r, rdb := procRedis(t)
	hc, err := lease.New(rdb)
	require.NoError(t, err)
	xc, err := lease.New(rdb)
	require.NoError(t, err)
	const rounds = 12
	violations := 0
	for round := range rounds {
		if processFrozenRound(t, r, rdb, hc, xc, round) {
			violations++
		}
	}
	if violations > 0 {
		t.Errorf("two holders at once in %d of %d rounds", violations, rounds)
	}
}

// processFrozenRound is one round of TestProcessFrozenWaiterTwoHolders; it
// reports whether W and X held the lock at once.
func processFrozenRound(t *testing.T, r *testenv.Redis, rdb *redis.Client, hc, xc *lease.Client, round int) (violation bool) {
	// no t.Helper: failures point here
	ctx := t.Context()
	n := fmt.Sprintf("%s-%d", name(t), round)
	h, err := hc.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)

	w := startProcChild(t, r.Addr(), n, time.Second, 20*time.Second, false)
	var wID string
	require.Eventually(t, func() bool {
		m := procQueue(t, rdb, n)
		if len(m) == 1 {
			wID = m[0]
		}
		return wID != ""
	}, 10*time.Second, 2*time.Millisecond, "round %d: W queued", round)
	procWaitSubscribed(t, rdb, n)

	pid := w.cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	require.True(t, faults.WaitStopped(ctx, pid, 5*time.Second), "round %d: W stopped", round)
	thawed := false
	defer func() {
		if !thawed {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()

	require.NoError(t, h.Release(ctx))
	v, err := rdb.Get(ctx, procLockKey(n)).Result()
	require.NoError(t, err)
	require.True(t, procHolderOf(v, wID), "round %d: the release handed the lock to the frozen W (%s), Redis has %q", round, wID, v)

	// X waits; it gets the lock once W's 1s ran out.
	xctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	x, err := xc.Acquire(xctx, n, time.Minute)
	require.NoError(t, err, "round %d: X gets the lock after W's ttl", round)
	v, err = rdb.Get(ctx, procLockKey(n)).Result()
	require.NoError(t, err)
	require.True(t, procHolderOf(v, x.Holder()), "round %d: Redis holds X's id, has %q", round, v)

	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	thawed = true

	// Give W the time to misbehave: until it reports, or is queued again
	// behind X (it found out that X has the lock).
	var rep procReport
	reported, xHeld := false, false
	deadline := time.Now().Add(5 * time.Second)
	for !reported && time.Now().Before(deadline) {
		select {
		case rep = <-w.report:
			reported, xHeld = true, x.Held()
			continue
		case <-time.After(2 * time.Millisecond):
		}
		if m := procQueue(t, rdb, n); len(m) > 0 && m[0] == wID {
			break
		}
	}
	require.NoError(t, x.Release(ctx), "round %d: X's release", round)
	if !reported {
		rep = w.waitReport(t, 15*time.Second)
	}
	w.waitExit(t, 10*time.Second)

	t.Logf("round %d: W %s: %+v; X token %d, X Held() when W reported: %v (reported before X released: %v)",
		round, wID, rep, x.Token().Seq, xHeld, reported)
	if rep.Err != "" || !rep.Held {
		t.Errorf("round %d: W did not get the lock after X released: %+v", round, rep)
		return false
	}
	if rep.Seq < x.Token().Seq {
		violation = true
		t.Errorf("round %d: two holders: W's Acquire returned a lease with Held() true and token %d, handed to it while it was frozen, "+
			"after X had taken the lock with token %d (X Held() at W's report: %v; W's deadline in %s)",
			round, rep.Seq, x.Token().Seq, xHeld, rep.Deadline)
	}
	if procHolderOf(rep.Redis, x.Holder()) {
		violation = true
		t.Errorf("round %d: W's lease is Held() while Redis holds X's id: %q", round, rep.Redis)
	}
	return violation
}

// TestProcessWaiterLeavesQueue: a waiter in another process whose Acquire's
// context ends, and which then closes its lease.Client and exits, is out of
// the queue when it has exited; when the holder releases, a new waiter gets
// the lock at once, not after the 20s ttl the one that left asked for.
func TestProcessWaiterLeavesQueue(t *testing.T) {
	r, rdb := procRedis(t)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	n := name(t)
	h, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)

	w := startProcChild(t, r.Addr(), n, 20*time.Second, 300*time.Millisecond, true)
	var wID string
	require.Eventually(t, func() bool {
		m := procQueue(t, rdb, n)
		if len(m) == 1 {
			wID = m[0]
		}
		return wID != ""
	}, 10*time.Second, time.Millisecond, "the child queued")
	rep := w.waitReport(t, 10*time.Second)
	w.waitExit(t, 10*time.Second)
	t.Logf("child %s: %+v", wID, rep)
	assert.NotEmpty(t, rep.Err, "the child's Acquire failed: the lock was held")
	assert.True(t, rep.HasClose, "lease.Client has no Close(ctx) method: the child exited right after its Acquire returned")

	_, err = rdb.ZScore(ctx, procQueueKey(n), wID).Result()
	assert.ErrorIs(t, err, redis.Nil, "the queue still holds the id of the waiter that left (%s) after its process exited", wID)

	require.NoError(t, h.Release(ctx))
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.Acquire(wctx, n, time.Minute)
	if !assert.NoError(t, err, "a new waiter gets the lock at once after the release") {
		v, _ := rdb.Get(ctx, procLockKey(n)).Result()
		pttl, _ := rdb.PTTL(ctx, procLockKey(n)).Result()
		t.Logf("lock %q after %v: %q, ttl %v (the waiter that left is %s)", n, time.Since(start), v, pttl, wID)
		return
	}
	t.Logf("the new waiter got the lock %v after the release", time.Since(start))
	require.NoError(t, l.Release(ctx))
}

// TestFairBackoffCapAfterExpiry: a fair waiter whose client has a backoff
// cap of 40ms finds a lock freed without a release message (the key
// deleted, as when it expires) within a few multiples of that cap.
func TestFairBackoffCapAfterExpiry(t *testing.T) {
	ctx := t.Context()
	n := name(t)
	holder := newClient(t)
	h, err := holder.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { h.Release(context.Background()) })

	c := newClient(t, lease.WithBackoff(5*time.Millisecond, 40*time.Millisecond))
	type result struct {
		l   *lease.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() {
		l, err := c.Acquire(wctx, n, time.Minute)
		got <- result{l, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return len(procQueue(t, shared, n)) == 1 }, 10*time.Second, time.Millisecond, "queued")
	procWaitSubscribed(t, shared, n)
	time.Sleep(100 * time.Millisecond) // past its tries around the subscription: waiting

	require.NoError(t, shared.Del(ctx, procLockKey(n)).Err())
	freed := time.Now()
	res := <-got
	require.NoError(t, res.err)
	took := res.at.Sub(freed)
	t.Logf("the waiter got the lock %v after it was freed without a release message", took)
	assert.Less(t, took, 300*time.Millisecond,
		"a waiter with WithBackoff(5ms, 40ms) took %v to find the lock freed without a release message", took)
	require.NoError(t, res.l.Release(ctx))
}

// TestCancelledInFlightAcquire: on a go-redis client that does not honour
// contexts (no ContextTimeoutEnabled), an Acquire whose context is
// cancelled while its reply is on the way fails with an error wrapping
// context.Canceled and ErrNotAcquired, and the lock it took in Redis does
// not stay held.
func TestCancelledInFlightAcquire(t *testing.T) {
	r := testenv.NewRedis(t)
	admin := r.Client()
	t.Cleanup(func() { admin.Close() })
	px := faults.NewProxy(t, r.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr()}) // ContextTimeoutEnabled: false
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()

	// Warm up: a connection open and the scripts loaded.
	warm, err := c.Acquire(ctx, name(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	px.DelayReplies(time.Second)
	n := name(t)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		l   *lease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Acquire(actx, n, time.Minute)
		got <- result{l, err}
	}()
	// The script ran (the key is there): its reply is on its way.
	require.Eventually(t, func() bool { return admin.Exists(ctx, procLockKey(n)).Val() == 1 },
		5*time.Second, time.Millisecond, "the acquire reached Redis")
	cancel()
	res := <-got
	px.DelayReplies(0)

	if res.l != nil {
		t.Errorf("Acquire returned a lease (token %d, Held() %v) and error %v after its context was cancelled with the reply in flight",
			res.l.Token().Seq, res.l.Held(), res.err)
	}
	assert.ErrorIs(t, res.err, context.Canceled)
	assert.ErrorIs(t, res.err, lease.ErrNotAcquired)
	assert.Eventually(t, func() bool { return admin.Exists(ctx, procLockKey(n)).Val() == 0 },
		5*time.Second, 10*time.Millisecond, "the lock taken by the cancelled Acquire is still held in Redis")
}

// TestAcquireNeverReturnsAnEndedLease: a reply read after the lease's local
// deadline (the process paused with it in flight; here every reply is
// delayed past the ttl) must not be returned as a lease that is already
// over: Acquire tries again, and gives up at its context with the lock
// released. Before, it returned a lease with Held() false.
func TestAcquireNeverReturnsAnEndedLease(t *testing.T) {
	r := testenv.NewRedis(t)
	admin := r.Client()
	t.Cleanup(func() { admin.Close() })
	px := faults.NewProxy(t, r.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	warm, err := c.Acquire(ctx, name(t), time.Minute) // a connection open, the scripts loaded
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	const ttl = 100 * time.Millisecond
	px.DelayReplies(3 * ttl)
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n := name(t)
	l, err := c.Acquire(actx, n, ttl)
	px.DelayReplies(0)
	if l != nil {
		t.Fatalf("Acquire returned a lease that is over (Held() %v, deadline %v ago)", l.Held(), time.Since(l.Deadline()))
	}
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, c.Close(ctx))
	assert.Eventually(t, func() bool { return admin.Exists(ctx, procLockKey(n)).Val() == 0 },
		5*time.Second, 10*time.Millisecond, "no lock left behind for long")
}
