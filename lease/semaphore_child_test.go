package lease_test

// The children of the semaphore's process tests
// (semaphore_process_test.go): the test binary re-executed in a child mode
// (see semProcessChild), and the harness that starts, commands, freezes
// (SIGSTOP) and kills (SIGKILL) them.
//
// Two child modes. "semcmd" holds one Semaphore and obeys commands read
// from its stdin, one a line (acquire, release, write, stopwrite),
// answering each with one JSON line (semReport) on its stdout. "semloop"
// takes a permit, holds it a little, releases it, and again, until a
// given instant, and writes what it believed into a file of its own
// (semRecord lines), each line as soon as the belief starts or ends, so
// that a child killed while holding leaves its start behind.
//
// The keys are spelled out here (prefix "fencelock:"), as package lease
// documents them: PREFIX{NAME}#i is slot i's lock, PREFIX{NAME}#queue the
// queue.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

// The semaphore children's environment, besides process_test.go's
// procAddrEnv, procNameEnv, procTTLEnv and procWaitEnv.
const (
	semPermitsEnv = "FENCELOCK_TEST_PERMITS" // N
	semStoreEnv   = "FENCELOCK_TEST_STORE"   // semcmd: the verifier's Redis host:port
	semRecordEnv  = "FENCELOCK_TEST_RECORD"  // semloop: the file it records its beliefs in
	semUntilEnv   = "FENCELOCK_TEST_UNTIL"   // semloop: when to stop, unix ns
)

// semReport is a semcmd child's answer to one command.
type semReport struct {
	Op       string `json:"op"` // the command; "stopping" before a stopwrite's pause
	Err      string `json:"err,omitempty"`
	Slot     int    `json:"slot"`
	Key      string `json:"key,omitempty"` // the token's Key
	Seq      uint64 `json:"seq,omitempty"`
	Holder   string `json:"holder,omitempty"`
	Held     bool   `json:"held"`               // the lease's Held(), read first
	At       int64  `json:"at"`                 // unix ns, read right after the call returned
	Deadline int64  `json:"deadline,omitempty"` // the lease's Deadline(), unix ns
	Stale    bool   `json:"stale,omitempty"`    // a write refused with verifier.ErrStale
	Highest  uint64 `json:"highest,omitempty"`  // its StaleError's Highest
}

// semRecord is one line of a semloop child's file: a belief that starts
// (End 0: Acquire returned, at From) or ends (End: it stops using the
// permit and goes to release it).
type semRecord struct {
	Slot     int    `json:"slot"`
	Seq      uint64 `json:"seq"`
	From     int64  `json:"from,omitempty"`
	End      int64  `json:"end,omitempty"`
	Deadline int64  `json:"deadline"` // the lease's Deadline(), unix ns, read with From or End
}

// semProcessChild runs a semaphore child mode when procEnv names one (the
// test binary re-executed by startSemChild) and reports whether it did.
func semProcessChild(mode string) (int, bool) {
	var run func() error
	switch mode {
	case "semcmd":
		run = semCmdMain
	case "semloop":
		run = semLoopMain
	default:
		return 0, false
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2, true
	}
	return 0, true
}

// semChildSemaphore opens the child's own go-redis client, lease.Client and
// Semaphore from the environment.
func semChildSemaphore() (*redis.Client, *lease.Semaphore, time.Duration, error) {
	ttl, err1 := time.ParseDuration(os.Getenv(procTTLEnv))
	permits, err2 := strconv.Atoi(os.Getenv(semPermitsEnv))
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, 0, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(procAddrEnv), ContextTimeoutEnabled: true})
	c, err := lease.New(rdb)
	if err != nil {
		rdb.Close()
		return nil, nil, 0, err
	}
	s, err := c.Semaphore(os.Getenv(procNameEnv), permits)
	if err != nil {
		rdb.Close()
		return nil, nil, 0, err
	}
	return rdb, s, ttl, nil
}

// semCmdMain obeys the commands on stdin until it closes:
//
//	acquire    Acquire(ctx, ttl), ctx ending after procWaitEnv
//	release    Release the lease
//	write      write through the redisverifier with the lease's token: SET
//	           NAME:data to the holder id, resource NAME
//	stopwrite  read Held(), answer "stopping", stop itself (SIGSTOP) until
//	           SIGCONT, then write as above: a holder paused between its
//	           check and its write, as by a GC pause or a page fault
func semCmdMain() error {
	rdb, s, ttl, err := semChildSemaphore()
	if err != nil {
		return err
	}
	defer rdb.Close()
	wait, err := time.ParseDuration(os.Getenv(procWaitEnv))
	if err != nil {
		return err
	}
	var v *redisverifier.Verifier
	if addr := os.Getenv(semStoreEnv); addr != "" {
		store := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer store.Close()
		if v, err = redisverifier.New(store); err != nil {
			return err
		}
	}
	write := func(l *lease.Lease) error {
		if v == nil || l == nil {
			return errors.New("no verifier or no lease")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return v.Set(ctx, s.Name(), l.Token(), s.Name()+":data", l.Holder(), 0)
	}
	out := json.NewEncoder(os.Stdout)
	var l *lease.Lease
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var err error
		rep := semReport{Op: sc.Text()}
		switch rep.Op {
		case "acquire":
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			l, err = s.Acquire(ctx, ttl)
			cancel()
		case "release":
			if l == nil {
				return errors.New("release: no lease")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = l.Release(ctx)
			cancel()
		case "write":
			err = write(l)
		case "stopwrite":
			if err := out.Encode(semReport{Op: "stopping", Held: l.Held(), At: time.Now().UnixNano()}); err != nil {
				return err
			}
			faults.StopSelf()
			err = write(l)
		default:
			return fmt.Errorf("unknown command %q", rep.Op)
		}
		rep.At = time.Now().UnixNano()
		if err != nil {
			rep.Err = err.Error()
			var se *verifier.StaleError
			if errors.As(err, &se) {
				rep.Stale, rep.Highest = errors.Is(err, verifier.ErrStale), se.Highest
			}
		}
		if l != nil {
			rep.Held = l.Held()
			rep.Key, rep.Seq, rep.Holder = l.Token().Key, l.Token().Seq, l.Holder()
			rep.Deadline = l.Deadline().UnixNano()
			_, rep.Slot, _ = lease.ParsePermitName(l.Name())
		}
		if err := out.Encode(rep); err != nil {
			return err
		}
	}
	return sc.Err()
}

// semLoopMain takes a permit, holds it 5 to 80ms, releases it, waits up to
// 20ms, and again, until semUntilEnv; it records each belief in its file
// (semRecord), each line written at once, with one write(2).
func semLoopMain() error {
	rdb, s, ttl, err := semChildSemaphore()
	if err != nil {
		return err
	}
	defer rdb.Close()
	until, err := strconv.ParseInt(os.Getenv(semUntilEnv), 10, 64)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(os.Getenv(semRecordEnv), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	record := func(r semRecord) error {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = f.Write(append(b, '\n'))
		return err
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, until))
	defer cancel()
	for ctx.Err() == nil {
		l, err := s.Acquire(ctx, ttl)
		from := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "acquire:", err)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		_, slot, _ := lease.ParsePermitName(l.Name())
		r := semRecord{Slot: slot, Seq: l.Token().Seq, From: from.UnixNano(), Deadline: l.Deadline().UnixNano()}
		if err := record(r); err != nil {
			return err
		}
		time.Sleep(5*time.Millisecond + rand.N(75*time.Millisecond))
		r.From, r.End, r.Deadline = 0, time.Now().UnixNano(), l.Deadline().UnixNano()
		if err := record(r); err != nil {
			return err
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		l.Release(rctx) // ErrLost after a pause past the ttl: nothing to do
		rcancel()
		time.Sleep(rand.N(20 * time.Millisecond))
	}
	return nil
}

// semChild is a running semaphore child.
type semChild struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	reports chan semReport
	exited  chan struct{} // closed once it was reaped
	mu      sync.Mutex    // guards stderr, dead
	stderr  bytes.Buffer
	dead    bool // killed: signal it no more (its pid may be reused once reaped)
}

func (c *semChild) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.Write(p)
}

// startSemChild starts the test binary in child mode on semaphore n of
// permits on the Redis at addr, with env added (KEY=value).
func startSemChild(t *testing.T, mode, addr, n string, permits int, ttl time.Duration, env ...string) *semChild {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	c := &semChild{reports: make(chan semReport, 16), exited: make(chan struct{})}
	c.cmd = exec.Command(exe, "-test.run=^$")
	c.cmd.Env = append(append(os.Environ(),
		procEnv+"="+mode, procAddrEnv+"="+addr, procNameEnv+"="+n,
		semPermitsEnv+"="+strconv.Itoa(permits), procTTLEnv+"="+ttl.String()), env...)
	c.cmd.Stderr = c
	c.in, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var rep semReport
			if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
				c.Write([]byte("stdout: " + sc.Text() + "\n"))
				continue
			}
			c.reports <- rep
		}
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.kill()
		<-c.exited
		c.mu.Lock()
		defer c.mu.Unlock()
		if s := c.stderr.String(); s != "" {
			t.Logf("child %d (%s) stderr:\n%s", c.cmd.Process.Pid, mode, s)
		}
	})
	return c
}

// send writes one command to the child's stdin.
func (c *semChild) send(t *testing.T, cmd string) {
	t.Helper()
	_, err := io.WriteString(c.in, cmd+"\n")
	require.NoError(t, err, "command %q", cmd)
}

// next waits for the child's next answer, which must be to op.
func (c *semChild) next(t *testing.T, op string, timeout time.Duration) semReport {
	t.Helper()
	select {
	case rep := <-c.reports:
		require.Equal(t, op, rep.Op, "the child answered %+v", rep)
		return rep
	case <-c.exited:
		t.Fatalf("child exited (%v) before answering %q", c.cmd.ProcessState, op)
	case <-time.After(timeout):
		t.Fatalf("no answer to %q within %v", op, timeout)
	}
	panic("unreachable")
}

// signal sends sig unless the child was killed.
func (c *semChild) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL (once) and returns the instant it was sent.
func (c *semChild) kill() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.dead = true
		c.cmd.Process.Kill()
	}
	return time.Now()
}

// stop freezes the child and waits until it is frozen.
func (c *semChild) stop(t *testing.T) {
	t.Helper()
	c.signal(syscall.SIGSTOP)
	require.True(t, faults.WaitStopped(t.Context(), c.cmd.Process.Pid, 5*time.Second), "child %d stopped", c.cmd.Process.Pid)
}

func (c *semChild) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		t.Fatalf("child %d did not exit within %v", c.cmd.Process.Pid, timeout)
	}
}

func semSlotKey(n string, slot int) string { return "fencelock:{" + n + "}#" + strconv.Itoa(slot) }
func semQueueKey(n string) string          { return "fencelock:{" + n + "}#queue" }

// semWaitQueued waits until the semaphore's queue holds want waiters and
// returns them, head first.
func semWaitQueued(t *testing.T, rdb redis.UniversalClient, n string, want int) []string {
	t.Helper()
	var q []string
	require.Eventually(t, func() bool {
		var err error
		q, err = rdb.ZRange(t.Context(), semQueueKey(n), 0, -1).Result()
		return err == nil && len(q) == want
	}, 20*time.Second, 2*time.Millisecond, "%d waiters in %s", want, semQueueKey(n))
	return q
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns) }
