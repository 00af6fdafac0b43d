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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// The child's environment.
const (
	childEnv = "FENCEGOCRON_TEST_CHILD" // "locker" or "elector"
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
// Each run adds 1 to its tick's field of the hash named like the job: with
// the locker, the tick its lock is for; with the elector, the second of the
// run.
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
	var opt gocron.SchedulerOption
	var task func()
	switch mode {
	case "locker":
		l, err := NewLocker(c, time.Second)
		if err != nil {
			return err
		}
		// This host's clock is skew behind: it fires late by skew and reads
		// a time skew earlier.
		l.now = func() time.Time { return time.Now().Add(-skew) }
		rec := &recorder{Locker: l, skew: skew}
		opt = gocron.WithDistributedLocker(rec)
		task = func() {
			rdb.HIncrBy(context.Background(), job, strconv.FormatInt(rec.tick().Unix(), 10), 1)
			time.Sleep(jobTook)
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
		opt = gocron.WithDistributedElector(el)
		task = func() {
			tick := strconv.FormatInt(time.Now().Round(time.Second).Unix(), 10)
			seq := strconv.FormatUint(el.Term().Token().Seq, 10)
			rdb.HIncrBy(context.Background(), job, tick, 1)
			rdb.HSet(context.Background(), job+":pid", seq, os.Getpid()) // who led, by term
			time.Sleep(jobTook)
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	s, err := gocron.NewScheduler(opt)
	if err != nil {
		return err
	}
	if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(task), gocron.WithName(job)); err != nil {
		return err
	}
	s.Start()
	select {} // until killed
}

// recorder is the Locker of a host whose clock is behind (it fires skew
// late) and that remembers the tick of its last lock for the job to record.
type recorder struct {
	*Locker
	skew time.Duration
	mu   sync.Mutex
	last time.Time
}

func (r *recorder) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	time.Sleep(r.skew)
	k, err := r.Locker.Lock(ctx, key)
	if err == nil {
		r.mu.Lock()
		r.last = k.(*Lock).Tick()
		r.mu.Unlock()
	}
	return k, err
}

func (r *recorder) tick() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

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
