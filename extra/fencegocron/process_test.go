package fencegocron

// Real gocron schedulers in separate processes (the test binary re-executed
// in a child mode) on one real Redis: each records every run of its job in
// a Redis hash keyed by the tick, and the parent pauses one with SIGSTOP.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

// The child's environment.
const (
	childEnv = "FENCEGOCRON_TEST_CHILD" // "locker", "fenced" or "elector"
	addrEnv  = "FENCEGOCRON_TEST_ADDR"  // Redis host:port
	jobEnv   = "FENCEGOCRON_TEST_JOB"   // the job's name, also the runs hash
	skewEnv  = "FENCEGOCRON_TEST_SKEW"  // how far behind this host's clock is
)

// jobTook is how long each run lasts: shorter than the skew of the test's
// slow host, the case gocron #841 is about.
const jobTook = 50 * time.Millisecond

func child() (int, bool) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return 0, false
	}
	if err := scheduler(mode); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2, true
	}
	return 0, true
}

// scheduler runs a gocron scheduler with one job every second until killed.
// Each run adds 1 to its tick's field of the hash named like the job: the
// second it was scheduled for, by this host's clock (skew behind).
func scheduler(mode string) error {
	skew, err := time.ParseDuration(os.Getenv(skewEnv))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(addrEnv)})
	defer rdb.Close()
	c, err := lease.New(rdb)
	if err != nil {
		return err
	}
	job := os.Getenv(jobEnv)
	record := func(ctx context.Context) error {
		tick := strconv.FormatInt(time.Now().Add(-skew).Round(time.Second).Unix(), 10)
		tok, _ := fence.FromContext(ctx)
		rdb.HIncrBy(context.Background(), job, tick, 1)
		rdb.HSet(context.Background(), job+":pid", strconv.FormatUint(tok.Seq, 10), os.Getpid()) // who ran, by token
		time.Sleep(jobTook)
		return nil
	}
	// This host's clock is skew behind: its runs, each second by its clock,
	// fire skew late.
	every := gocron.DurationJob(time.Second)
	start := gocron.WithStartAt(gocron.WithStartDateTime(time.Now().Truncate(time.Second).Add(time.Second + skew)))
	var s gocron.Scheduler
	if mode == "fenced" {
		record, err = fencedWrite(rdb, job)
		if err != nil {
			return err
		}
	}
	switch mode {
	case "locker", "fenced":
		if s, err = gocron.NewScheduler(); err != nil {
			return err
		}
		jobs, err := once.New(rdb)
		if err != nil {
			return err
		}
		l, err := NewLocker(c, jobs)
		if err != nil {
			return err
		}
		_, err = l.NewJob(s, every, record, gocron.WithName(job), start)
		if err != nil {
			return err
		}
	case "elector":
		e, err := election.New(c, job+"-leader", time.Second)
		if err != nil {
			return err
		}
		el, err := NewElector(e)
		if err != nil {
			return err
		}
		go el.Run(context.Background())
		if s, err = gocron.NewScheduler(gocron.WithDistributedElector(el)); err != nil {
			return err
		}
		if _, err = el.NewJob(s, every, record, gocron.WithName(job), start); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	s.Start()
	select {} // until killed
}

// fencedWrite is the job of mode "fenced": it records that its run
// started (pid by token, in hash JOB:started), waits fencedWait, then sets
// the report key JOB:report to its pid through a redisverifier, with its
// token, and records the outcome ("ok" or the error, by token, in hash
// JOB:outcome). The wait ignores the run's context, as code paused
// mid-run would.
func fencedWrite(rdb *redis.Client, job string) (func(context.Context) error, error) {
	v, err := redisverifier.New(rdb)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		bg := context.Background()
		tok, _ := fence.FromContext(ctx)
		seq := strconv.FormatUint(tok.Seq, 10)
		rdb.HSet(bg, job+":started", seq, os.Getpid())
		time.Sleep(fencedWait)
		err := v.Set(bg, job, tok, job+":report", os.Getpid(), 0)
		outcome := "ok"
		if err != nil {
			outcome = err.Error()
		}
		rdb.HSet(bg, job+":outcome", seq, outcome)
		return err
	}, nil
}

// fencedWait is how long a fenced run waits before its write: long enough
// for the test to pause it first.
const fencedWait = 700 * time.Millisecond

func startScheduler(t *testing.T, mode, addr, job string, skew time.Duration) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, addrEnv+"="+addr, jobEnv+"="+job, skewEnv+"="+skew.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
		if s := stderr.String(); s != "" {
			t.Logf("scheduler %d stderr:\n%s", cmd.Process.Pid, s)
		}
	})
	return cmd
}

// runs returns the runs per tick (unix seconds) recorded in hash job.
func runs(t *testing.T, rdb *redis.Client, job string) map[int64]int {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), job).Result()
	require.NoError(t, err)
	out := map[int64]int{}
	for k, v := range m {
		tick, err1 := strconv.ParseInt(k, 10, 64)
		n, err2 := strconv.Atoi(v)
		require.NoError(t, errors.Join(err1, err2))
		out[tick] = n
	}
	return out
}

// Three schedulers with the Locker, one with a clock 300ms behind (longer
// than the job), one paused for 2.5s (more than two tick windows) and
// resumed: every tick from the first full second to the last runs exactly
// once.
func TestLockerEachTickRunsOnce(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	job := "tick-" + uuid.NewString()[:8]
	startScheduler(t, "locker", r.Addr(), job, 0)
	paused := startScheduler(t, "locker", r.Addr(), job, 0)
	startScheduler(t, "locker", r.Addr(), job, 300*time.Millisecond)

	from := time.Now().Add(2 * time.Second).Truncate(time.Second) // schedulers up
	time.Sleep(3 * time.Second)
	require.NoError(t, paused.Process.Signal(syscall.SIGSTOP))
	time.Sleep(2500 * time.Millisecond)
	require.NoError(t, paused.Process.Signal(syscall.SIGCONT))
	time.Sleep(3 * time.Second)
	to := time.Now().Add(-time.Second).Truncate(time.Second) // each has run

	got := runs(t, rdb, job)
	var ticks int
	for tick := from; !tick.After(to); tick = tick.Add(time.Second) {
		ticks++
		assert.Equal(t, 1, got[tick.Unix()], "tick %s", tick.Format("15:04:05"))
	}
	for tick, n := range got {
		assert.LessOrEqual(t, n, 1, "tick %d ran %d times", tick, n)
	}
	assert.GreaterOrEqual(t, ticks, 6)
}

// Three schedulers with the Elector; the leader's process is found and
// paused past its term and resumed: no tick runs twice, and ticks run
// again under a new leader.
func TestElectorOneLeaderRuns(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	job := "lead-" + uuid.NewString()[:8]
	cmds := []*exec.Cmd{
		startScheduler(t, "elector", r.Addr(), job, 0),
		startScheduler(t, "elector", r.Addr(), job, 0),
		startScheduler(t, "elector", r.Addr(), job, 0),
	}
	ctx := context.Background()
	c, err := lease.New(rdb)
	require.NoError(t, err)
	e, err := election.New(c, job+"-leader", time.Second)
	require.NoError(t, err)
	var first int64
	require.Eventually(t, func() bool {
		first, _ = rdb.HLen(ctx, job).Result()
		return first >= 2
	}, 15*time.Second, 50*time.Millisecond, "the leader runs the job")
	lead, err := e.Leader(ctx)
	require.NoError(t, err)

	pid, err := rdb.HGet(ctx, job+":pid", strconv.FormatUint(lead.Seq, 10)).Int()
	require.NoError(t, err, "the leader's job recorded its pid")
	var leader *exec.Cmd
	for _, c := range cmds {
		if c.Process.Pid == pid {
			leader = c
		}
	}
	require.NotNil(t, leader)
	require.NoError(t, leader.Process.Signal(syscall.SIGSTOP))
	time.Sleep(3 * time.Second)
	require.NoError(t, leader.Process.Signal(syscall.SIGCONT))
	next, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Greater(t, next.Seq, lead.Seq, "a new leader while the first was paused")
	before, _ := rdb.HLen(ctx, job).Result()
	time.Sleep(2 * time.Second)
	after, _ := rdb.HLen(ctx, job).Result()
	assert.Greater(t, after, before, "the new leader runs the job")

	for tick, n := range runs(t, rdb, job) {
		assert.Equal(t, 1, n, "tick %d ran %d times", tick, n)
	}
}

// Two schedulers with the Locker, each run writing a report through a
// verifier: the host running the job is paused (SIGSTOP) before its write,
// past its lease; the other host's next run writes; the paused host, resumed,
// writes with its old token and is refused, and the report stays the other
// host's.
func TestLockerFencesAPausedHost(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	job := "fenced-" + uuid.NewString()[:8]
	cmds := map[int]*exec.Cmd{}
	for range 2 {
		c := startScheduler(t, "fenced", r.Addr(), job, 0)
		cmds[c.Process.Pid] = c
	}

	// The first run to start: its host is paused before it writes.
	var seqA string
	var pidA int
	require.Eventually(t, func() bool {
		started, _ := rdb.HGetAll(ctx, job+":started").Result()
		for seq, pid := range started {
			seqA = seq
			pidA, _ = strconv.Atoi(pid)
			return true
		}
		return false
	}, 15*time.Second, 5*time.Millisecond, "a run starts")
	a := cmds[pidA]
	require.NotNil(t, a)
	require.NoError(t, a.Process.Signal(syscall.SIGSTOP))
	n, err := rdb.HLen(ctx, job+":outcome").Result()
	require.NoError(t, err)
	require.Zero(t, n, "the run was paused before its write (%v)", fencedWait)

	// The other host runs the job and writes.
	require.Eventually(t, func() bool {
		pid, _ := rdb.Get(ctx, job+":report").Int()
		return pid != 0 && pid != pidA
	}, 15*time.Second, 10*time.Millisecond, "the other host writes while the first is paused")
	require.NoError(t, a.Process.Signal(syscall.SIGCONT))

	var outcome string
	require.Eventually(t, func() bool {
		outcome, _ = rdb.HGet(ctx, job+":outcome", seqA).Result()
		return outcome != ""
	}, 15*time.Second, 10*time.Millisecond, "the paused run writes once resumed")
	assert.Contains(t, outcome, "stale", "the paused run's write is refused")
	pid, err := rdb.Get(ctx, job+":report").Int()
	require.NoError(t, err)
	assert.NotEqual(t, pidA, pid, "the report is the other host's")
	outcomes, err := rdb.HGetAll(ctx, job+":outcome").Result()
	require.NoError(t, err)
	t.Logf("outcomes by token: %v", outcomes)
}
