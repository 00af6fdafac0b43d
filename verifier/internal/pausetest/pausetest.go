// Package pausetest is the process test of a guarded transaction whose
// holder is frozen inside it (SIGSTOP), shared by the verifiers of SQL
// stores: the holder is the test binary re-executed, which takes a lease
// on a real Redis, begins the verifier's guarded transaction with the
// lease's context, writes, and stops there; the test then freezes it and
// lets the next holder take the lock and write.
//
// A verifier that bounds its transactions by the lease lets the next
// holder write about one ttl after the freeze, and the frozen holder's
// commit fails when it resumes; one that does not makes the next holder
// wait until the frozen one resumes.
package pausetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// The holder child's environment.
const (
	envRedis    = "FENCELOCK_PAUSETEST_REDIS" // Redis address; set in the child only
	envName     = "FENCELOCK_PAUSETEST_NAME"  // the lock and resource name
	envTTL      = "FENCELOCK_PAUSETEST_TTL"
	envArg      = "FENCELOCK_PAUSETEST_ARG" // the test's own argument (a DSN)
	insideLine  = "inside"
	resultLine  = "result: "
	resultOK    = "ok"
	goOnLine    = "go on"
	childBudget = time.Minute
)

// Hold is what the holder child does with its lease: begin the guarded
// transaction with ctx (the lease's context), tok and resource, write in
// it, call inside (which returns when the test lets it go on), and
// commit; it returns the outcome. arg is the test's argument (a DSN).
type Hold func(ctx context.Context, arg, resource string, tok fence.Token, inside func()) error

// Child runs hold when this process is a holder child started by [Run]
// and exits; otherwise it returns at once. Call it first in TestMain.
func Child(hold Hold) {
	addr := os.Getenv(envRedis)
	if addr == "" {
		return
	}
	err := child(addr, hold)
	if err == nil {
		fmt.Println(resultLine + resultOK)
	} else {
		fmt.Println(resultLine + strings.ReplaceAll(err.Error(), "\n", " "))
	}
	os.Exit(0)
}

func child(addr string, hold Hold) error {
	ttl, err := time.ParseDuration(os.Getenv(envTTL))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), childBudget)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		return err
	}
	defer locks.Close(context.Background())
	name := os.Getenv(envName)
	l, err := locks.TryAcquire(ctx, name, ttl)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	in := bufio.NewReader(os.Stdin)
	inside := func() {
		fmt.Println(insideLine)
		_, _ = in.ReadString('\n') // the test says "go on" after SIGCONT
	}
	return hold(l.Context(), os.Getenv(envArg), name, l.Token(), inside)
}

// Outcome is what [Run] saw.
type Outcome struct {
	// Next is the next holder's token.
	Next fence.Token
	// NextErr is the next holder's error; nil when it wrote.
	NextErr error
	// Took is the time from the freeze to the next holder's return.
	Took time.Duration
	// StoppedAfter is whether the frozen holder was still stopped when the
	// next holder returned.
	StoppedAfter bool
	// HolderErr is the frozen holder's outcome after it resumed: "" when
	// its commit went through, else its error's text.
	HolderErr string
}

// nextTTL is the next holder's ttl, and limit bounds its wait.
const (
	nextTTL = 10 * time.Second
	limit   = 30 * time.Second
)

// Run starts the holder child (the test binary, whose TestMain calls
// [Child]) on the Redis at addr with lock name and ttl, waits until it is
// inside its transaction, and freezes it with SIGSTOP. Then the next
// holder takes the lock (waiting at most 30s) with a 10s ttl, and write
// writes with its lease's context and token. Then Run resumes the child
// (SIGCONT), lets it go on, and returns what happened. It skips the test
// under -short.
func Run(t testing.TB, addr, arg, name string, ttl time.Duration, write func(ctx context.Context, tok fence.Token) error) Outcome {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a holder process")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	locks, err := lease.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close(context.Background()) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envRedis+"="+addr, envName+"="+name, envTTL+"="+ttl.String(), envArg+"="+arg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	line := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the holder exited before %s", what)
			}
			return l
		case <-time.After(childBudget):
			t.Fatalf("the holder did not say %s", what)
		}
		return ""
	}
	if l := line("it was inside"); l != insideLine {
		t.Fatalf("the holder said %q, want %q", l, insideLine)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var out Outcome
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	out.NextErr = func() error {
		l, err := locks.Acquire(ctx, name, nextTTL)
		if err != nil {
			return err
		}
		defer l.Release(context.Background())
		out.Next = l.Token()
		return write(l.Context(), out.Next)
	}()
	cancel()
	out.Took = time.Since(start)
	out.StoppedAfter = stopped(t, cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(stdin, goOnLine); err != nil {
		t.Fatal(err)
	}
	res := line("its result")
	if !strings.HasPrefix(res, resultLine) {
		t.Fatalf("the holder said %q, want its result", res)
	}
	out.HolderErr = strings.TrimPrefix(res, resultLine)
	if out.HolderErr == resultOK {
		out.HolderErr = ""
	}
	return out
}

// stopped reports whether process pid is stopped by a signal (state T in
// /proc/pid/stat).
func stopped(t testing.TB, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // after the command name, which may hold spaces
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}
