// Package devserver lets an example program run on a fresh machine: when
// REDIS_URL or DATABASE_URL is unset, it starts a throwaway redis-server or
// PostgreSQL (internal/testenv) and runs the program with the variable set.
//
// It is not part of any example. Each example's main.go reads its servers
// from the environment as user code would; a second file, dev.go, calls
// [Run] from init. Copy main.go without dev.go into your own project.
//
// Run re-executes the program as a child process rather than handing the
// URLs back, so that main.go needs no hook for it, and so that the servers
// are stopped and their directories removed however the program ends
// (return, log.Fatal, panic, Ctrl-C).
package devserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// The variables Run knows how to satisfy.
const (
	Redis    = "REDIS_URL"    // a throwaway redis-server, no persistence
	Postgres = "DATABASE_URL" // a throwaway PostgreSQL, database "fencelock"
)

// childMark is set in the child's environment, so that a child never starts
// servers of its own.
const childMark = "FENCELOCK_DEVSERVER_CHILD"

// Run makes sure each of vars (Redis, Postgres) is set. When all are set it
// returns at once and the program runs as written. Otherwise it starts a
// throwaway server for each unset one, runs this program again with the
// variables pointing at them, stops the servers when it exits and exits with
// its status: Run does not return. Call it from init.
func Run(vars ...string) {
	if os.Getenv(childMark) != "" {
		return
	}
	var missing []string
	for _, v := range vars {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 {
		return
	}
	os.Exit(supervise(missing))
}

// supervise starts the servers for missing, runs the program under them and
// returns the exit status to exit with.
func supervise(missing []string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	env, stop, err := start(ctx, missing)
	cancel()
	defer stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		return 1
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), append(env, childMark+"=1")...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The program dies with this process, which holds its servers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	// Ctrl-C reaches the program too (same process group); this process
	// waits for it to exit, then stops the servers. A signal sent to this
	// process alone is passed on.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		return 1
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "devserver:", err)
		return 1
	}
}

// start starts one server per variable in missing and returns the
// environment entries that point at them, and a func that stops them (never
// nil, also after an error).
func start(ctx context.Context, missing []string) (env []string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, v := range missing {
		var url string
		switch v {
		case Redis:
			r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
			if err != nil {
				return nil, stop, err
			}
			stops = append(stops, func() { r.Close() })
			url = r.URL()
		case Postgres:
			p, err := testenv.StartPostgres(ctx)
			if err != nil {
				return nil, stop, err
			}
			stops = append(stops, func() { p.Close() })
			url = p.DSN()
		default:
			return nil, stop, fmt.Errorf("%s: no throwaway server for this variable", v)
		}
		fmt.Fprintf(os.Stderr, "devserver: %s is not set: using a throwaway server, %s=%s (stopped on exit)\n", v, v, url)
		env = append(env, v+"="+url)
	}
	return env, stop, nil
}
