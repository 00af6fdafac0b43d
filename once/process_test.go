package once_test

// Three hosts as real processes (the test binary re-executed in a child
// mode), each firing the job at every tick of its own clock, the clocks
// offset; one host is stopped with SIGSTOP in the middle of its job.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
	"github.com/fencelock/fencelock/verifier"
)

// The host child's environment.
const (
	hostEnv     = "FENCELOCK_ONCE_HOST" // the host's number
	hostAddrEnv = "FENCELOCK_ONCE_ADDR"
	hostNameEnv = "FENCELOCK_ONCE_NAME"
	hostSkewEnv = "FENCELOCK_ONCE_SKEW" // the host's clock minus the real one
	hostT0Env   = "FENCELOCK_ONCE_T0"   // tick 0, Unix ms, on a right clock
)

const (
	hostTick      = 2 * time.Second
	hostTicks     = 4
	hostTolerance = time.Second
	hostTTL       = 300 * time.Millisecond
	hostJob       = 600 * time.Millisecond // time for the test to stop the host in it
	hostPause     = time.Second            // > hostTTL
)

// hostEvent is one line a host prints.
type hostEvent struct {
	Host int    `json:"host"`
	Tick int    `json:"tick"`
	Ev   string `json:"ev"` // start, completed, done, refused, busy, error
	Seq  uint64 `json:"seq,omitempty"`
	Err  string `json:"err,omitempty"`
}

// hostChild runs the host mode when the environment asks for it.
func hostChild() (int, bool) {
	if os.Getenv(hostEnv) == "" {
		return 0, false
	}
	if err := hostMain(); err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 2, true
	}
	return 0, true
}

// hostMain fires the job at ticks 1..hostTicks of its own clock, which is
// off the real one by its skew: tick k fires when the host's clock reads
// T0 + k*hostTick. The job ignores its context (the worst case: it
// finishes its work even after its lease was lost) and prints "start".
func hostMain() error {
	host, err := strconv.Atoi(os.Getenv(hostEnv))
	if err != nil {
		return err
	}
	skew, err := time.ParseDuration(os.Getenv(hostSkewEnv))
	if err != nil {
		return err
	}
	t0ms, err := strconv.ParseInt(os.Getenv(hostT0Env), 10, 64)
	if err != nil {
		return err
	}
	t0, n := time.UnixMilli(t0ms), os.Getenv(hostNameEnv)
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(hostAddrEnv), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		return err
	}
	defer locks.Close(context.Background())
	jobs, err := once.New(rdb, once.WithTolerance(hostTolerance))
	if err != nil {
		return err
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e hostEvent) {
		mu.Lock()
		defer mu.Unlock()
		e.Host = host
		_ = enc.Encode(e)
	}
	now := func() time.Time { return time.Now().Add(skew) } // the host's clock
	for k := 1; k <= hostTicks; k++ {
		time.Sleep(t0.Add(time.Duration(k) * hostTick).Sub(now()))
		ctx, cancel := context.WithTimeout(context.Background(), hostTick/2)
		l, err := locks.Acquire(ctx, n, hostTTL, lease.WithKeepAlive(0))
		cancel()
		if err != nil {
			emit(hostEvent{Tick: k, Ev: "busy", Err: err.Error()})
			continue
		}
		seq := l.Token().Seq
		err = jobs.Do(context.Background(), l, hostTick, func(context.Context) error {
			emit(hostEvent{Tick: k, Ev: "start", Seq: seq})
			time.Sleep(hostJob)
			return nil
		})
		switch {
		case err == nil:
			emit(hostEvent{Tick: k, Ev: "completed", Seq: seq})
		case errors.Is(err, once.ErrDone):
			emit(hostEvent{Tick: k, Ev: "done", Seq: seq})
		case errors.Is(err, verifier.ErrStale):
			emit(hostEvent{Tick: k, Ev: "refused", Seq: seq, Err: err.Error()})
		default:
			emit(hostEvent{Tick: k, Ev: "error", Seq: seq, Err: err.Error()})
		}
		_ = l.Release(context.Background())
	}
	return nil
}

// TestThreeHostsOffsetClocksPausedHolder: hosts whose clocks are 400ms
// ahead, right and 400ms behind fire the job at each tick; the host ahead
// wins each tick and, at tick 2, is stopped (SIGSTOP) in the middle of its
// job, past its lease. Every tick's job completes once; at tick 2 another
// host takes over, and the paused host, resumed, cannot mark the tick done.
func TestThreeHostsOffsetClocksPausedHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three processes for about 10s")
	}
	r := testenv.NewRedis(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	n := name(t)
	t0 := time.Now().Add(2 * time.Second).Truncate(time.Second) // time for the hosts to start

	events := make(chan hostEvent, 100)
	skews := []time.Duration{400 * time.Millisecond, 0, -400 * time.Millisecond}
	cmds := make([]*exec.Cmd, len(skews))
	var readers sync.WaitGroup
	for i, skew := range skews {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), hostEnv+"="+strconv.Itoa(i), hostAddrEnv+"="+r.Addr(),
			hostNameEnv+"="+n, hostSkewEnv+"="+skew.String(), hostT0Env+"="+strconv.FormatInt(t0.UnixMilli(), 10))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		cmds[i] = cmd
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		readers.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var e hostEvent
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Errorf("host %d: %s", i, sc.Text())
					continue
				}
				events <- e
			}
		})
	}
	go func() { readers.Wait(); close(events) }()

	var all []hostEvent
	paused := false
	deadline := time.After(time.Until(t0) + (hostTicks+3)*hostTick)
collect:
	for {
		select {
		case e, ok := <-events:
			if !ok {
				break collect
			}
			all = append(all, e)
			t.Logf("%+v", e)
			if !paused && e.Host == 0 && e.Tick == 2 && e.Ev == "start" {
				paused = true
				require.NoError(t, cmds[0].Process.Signal(syscall.SIGSTOP))
				time.Sleep(hostPause)
				require.NoError(t, cmds[0].Process.Signal(syscall.SIGCONT))
			}
		case <-deadline:
			t.Fatal("the hosts did not finish")
		}
	}
	for i, cmd := range cmds {
		assert.NoError(t, cmd.Wait(), "host %d", i)
	}
	require.True(t, paused, "host 0 (clock ahead) started tick 2's job")

	for k := 1; k <= hostTicks; k++ {
		var completed, starts []hostEvent
		for _, e := range all {
			switch {
			case e.Tick == k && e.Ev == "completed":
				completed = append(completed, e)
			case e.Tick == k && e.Ev == "start":
				starts = append(starts, e)
			case e.Ev == "error":
				t.Errorf("host %d tick %d: %s", e.Host, e.Tick, e.Err)
			}
		}
		require.Len(t, completed, 1, "tick %d completes once", k)
		if k != 2 {
			assert.Len(t, starts, 1, "tick %d's job starts once", k)
			continue
		}
		// Tick 2: the paused host started, another host took over.
		assert.GreaterOrEqual(t, len(starts), 2, "tick 2: the paused host's run and the takeover")
		assert.NotEqual(t, 0, completed[0].Host, "tick 2 is completed by the host that took over")
		var refused []hostEvent
		for _, e := range all {
			if e.Tick == 2 && e.Ev == "refused" {
				refused = append(refused, e)
			}
		}
		// The paused host's completion is refused; on a loaded machine the
		// host that took over may lose its lease too, and then be refused
		// as well: every refused completion is older than the one that
		// landed.
		pausedRefused := false
		for _, e := range refused {
			pausedRefused = pausedRefused || e.Host == 0
			assert.Less(t, e.Seq, completed[0].Seq, "host %d's refused completion is older than the one that landed", e.Host)
		}
		assert.True(t, pausedRefused, "the paused host's completion is refused: %v", refused)
	}
	// Redis says the last tick's run is the one that marked the job done.
	var last hostEvent
	for _, e := range all {
		if e.Ev == "completed" && e.Tick == hostTicks {
			last = e
		}
	}
	doneBy, err := r.Client().HGet(t.Context(), once.StatePrefix+"{"+n+"}", "done_by").Result()
	require.NoError(t, err)
	assert.Regexp(t, "^"+strconv.FormatUint(last.Seq, 10)+":", doneBy)
}
