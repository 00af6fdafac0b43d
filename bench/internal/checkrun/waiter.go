package checkrun

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/lease"
)

// The waiter process of the pause-waiter and leave-queue faults. A frozen
// waiter has to be a process (a goroutine cannot be frozen from outside,
// and a process frozen by SIGSTOP is what a GC pause or a stopped VM looks
// like to the lock), and so does a waiter that leaves by exiting. The bench
// binary, or this package's test binary, re-executes itself with
// WaiterEnv set, and its main (or TestMain) calls RunWaiter, as for
// bench safety's worker.
//
// This file is the waiter process's own side; waiter_proc.go is the
// parent's handle on it.

// WaiterEnv is the environment variable that makes the process a waiter:
// its value is a waiterSpec in JSON.
const WaiterEnv = "FENCELOCK_CHECK_WAITER"

// RunWaiter is the waiter process: spec is the value of WaiterEnv.
func RunWaiter(spec string) error { return runWaiter(spec, os.Stdin, os.Stdout) }

// Waiter modes.
const (
	waitPause = "pause" // frozen by the parent while queued, then thawed
	waitLeave = "leave" // gives up while queued: "cancel" on stdin, SIGTERM, or killed
)

// waiterSpec is what the waiter process is told at start.
type waiterSpec struct {
	Mode     string `json:"mode"`
	Addr     string `json:"addr"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
	Lock     string `json:"lock"`
	// TTL is the lock's ttl.
	TTL time.Duration `json:"ttl"`
	// QueuedAfter: an Acquire still waiting after this long is queued.
	QueuedAfter time.Duration `json:"queued_after"`
	// AfterThaw: in pause mode, how long the Acquire may go on after the
	// SIGCONT before its context ends.
	AfterThaw time.Duration `json:"after_thaw"`
	// Hold is how long a lease the waiter got is held before Release.
	Hold time.Duration `json:"hold"`
}

// Lines the waiter prints, one per step.
const (
	lineReady  = "ready"  // connected; waits for "go" on stdin
	lineQueued = "queued" // its Acquire has been waiting QueuedAfter
	lineResult = "result" // followed by a waiterResult in JSON; the last line
)

// waiterLease is one lease the waiter got, in Unix ns of the wall clock
// (the parent converts them to its history's offsets).
type waiterLease struct {
	Returned  int64       `json:"returned"` // Acquire returned
	Token     check.Token `json:"token"`
	Held      bool        `json:"held"`       // Held() then
	Deadline  int64       `json:"deadline"`   // its local deadline
	HeldAfter bool        `json:"held_after"` // Held() after the hold, before Release
	Released  int64       `json:"released"`   // Release called
	Err       string      `json:"release_err,omitempty"`
}

// waiterResult is what the waiter reports before it exits.
type waiterResult struct {
	// Immediate counts acquisitions that returned at once (the lock was
	// free), each released at once, before one queued.
	Immediate int  `json:"immediate"`
	Queued    bool `json:"queued"`
	// Leases is every lease it got, the immediate ones included; the last
	// is the queued Acquire's, if it returned one.
	Leases []waiterLease `json:"leases,omitempty"`
	// Returned is when the queued Acquire returned, Err its error.
	Returned int64  `json:"returned,omitempty"`
	Err      string `json:"err,omitempty"`
	// Thawed (pause) is when the SIGCONT arrived; Left (leave) when it
	// was told to leave.
	Thawed int64 `json:"thawed,omitempty"`
	Left   int64 `json:"left,omitempty"`
	// Closed: lease.Client.Close returned before the exit, its leave
	// done; else CloseErr is its error.
	Closed   bool   `json:"closed"`
	CloseErr string `json:"close_err,omitempty"`
}

// maxImmediate bounds the acquisitions a waiter makes, 10 ms apart, on a
// lock that is free when it tries, before it gives up queueing.
const maxImmediate = 20

// runWaiter is the waiter process: spec is the value of WaiterEnv; it
// reads commands from in and prints its lines to out.
func runWaiter(specJSON string, in io.Reader, out io.Writer) error {
	var spec waiterSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("%s: %w", WaiterEnv, err)
	}
	say := func(s string) { fmt.Fprintln(out, s) }
	rdb := redis.NewClient(&redis.Options{Addr: spec.Addr, Username: spec.Username, Password: spec.Password, DB: spec.DB,
		ContextTimeoutEnabled: true, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: -1})
	defer rdb.Close()
	// The lock's client as the run's clients have it (bench/internal/locks:
	// lease.New with its defaults: fair).
	lc, err := lease.New(rdb)
	if err != nil {
		return err
	}
	// It is started during the window before its own, whatever fault that
	// is (a restarting or paused server): it waits for Redis to answer.
	for t := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			break
		}
		if time.Since(t) > 10*time.Second {
			return err
		}
	}
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	cmds := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			cmds <- strings.TrimSpace(sc.Text())
		}
		close(cmds)
	}()
	say(lineReady)
	if c, ok := <-cmds; !ok || c != "go" {
		return nil // the parent gave up on it
	}

	ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAll()
	var res waiterResult
	hold := func(l *lease.Lease, at time.Time, d time.Duration) {
		wl := waiterLease{Returned: at.UnixNano(), Token: check.TokenOf(l.Token()), Held: l.Held(),
			Deadline: at.UnixNano() + int64(l.Deadline().Sub(at))}
		time.Sleep(d)
		wl.HeldAfter = l.Held()
		wl.Released = time.Now().UnixNano()
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := l.Release(rctx); err != nil {
			wl.Err = err.Error()
		}
		cancel()
		res.Leases = append(res.Leases, wl)
	}
	type outcome struct {
		l   *lease.Lease
		err error
		at  time.Time
	}
	for {
		actx, acancel := context.WithCancel(ctx)
		done := make(chan outcome, 1)
		go func() {
			l, err := lc.Acquire(actx, spec.Lock, spec.TTL)
			done <- outcome{l, err, time.Now()}
		}()
		queued := time.NewTimer(spec.QueuedAfter)
		select {
		case o := <-done:
			queued.Stop()
			acancel()
			if o.err != nil {
				res.Err = o.err.Error()
				return closeAndReport(lc, &res, say)
			}
			// The lock was free: not the case to stage. Let it go and
			// queue again, for a while at most.
			res.Immediate++
			hold(o.l, o.at, 0)
			if res.Immediate == maxImmediate {
				res.Err = fmt.Sprintf("the lock was free at each of %d tries: never queued", maxImmediate)
				return closeAndReport(lc, &res, say)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		case <-queued.C:
		}
		res.Queued = true
		say(lineQueued)
		var o outcome
		switch spec.Mode {
		case waitPause:
			select {
			case o = <-done: // returned before the stop landed, or before the SIGCONT was read
			case <-cont:
				res.Thawed = time.Now().UnixNano()
				t := time.AfterFunc(spec.AfterThaw, acancel)
				o = <-done
				t.Stop()
			}
		default: // waitLeave
			select {
			case o = <-done: // the lock reached it before it was told to leave
			case <-cmds:
				res.Left = time.Now().UnixNano()
				acancel()
				o = <-done
			case <-term:
				res.Left = time.Now().UnixNano()
				acancel()
				o = <-done
			}
		}
		acancel()
		res.Returned = o.at.UnixNano()
		if o.err != nil {
			res.Err = o.err.Error()
		} else {
			d := spec.Hold
			if spec.Mode == waitLeave {
				d = 0 // it means to leave: let the lock go at once
			}
			hold(o.l, o.at, d)
		}
		return closeAndReport(lc, &res, say)
	}
}

// closeAndReport closes the lock client, waiting for its background leave,
// and prints the result.
func closeAndReport(lc *lease.Client, res *waiterResult, say func(string)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res.Closed, res.CloseErr = closeClient(ctx, lc)
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	say(lineResult + " " + string(b))
	return nil
}

// closeClient calls lease.Client.Close(ctx), which waits for the client's
// background cleanups (a leaving waiter's leave above all), so that a
// process that exits right after an Acquire ended does not leave its ticket
// behind. It reports whether Close returned in time, and its error.
func closeClient(ctx context.Context, lc *lease.Client) (bool, string) {
	if err := lc.Close(ctx); err != nil {
		return false, err.Error()
	}
	return true, ""
}
