// Command bench measures fencelock against the Redis floor and its peers:
// speed (perf), what the protected data suffers under failures staged one
// at a time (safety), and histories of many clients under random faults
// checked against a model (check).
//
//	go run ./bench perf [-quick] [-json FILE] [-html FILE] [-redis-url URL[,URL...]] [-database-url URL]
//	go run ./bench safety [-quick] [-json FILE] [-html FILE] [-scenario NAME,...] [-locks KIND,...] [-database-url URL]
//	go run ./bench check [-quick] [-seed N] [-clients N] [-duration D] [-locks KIND,...] [-faults FAULT,...] [-json FILE] [-html FILE]
//
// safety exits with status 3 when a must-hold rule is broken: a fenced lock
// kind lost an update or accepted a stale write, or a scenario provoked no
// anomaly in an unfenced kind. check exits with status 3 when a fenced kind
// shows any anomaly (an unfenced kind without one is only reported).
//
// Without URLs it starts throwaway servers (one redis-server for the
// single-node locks, five independent ones for the quorum locks, and a
// PostgreSQL), so a first run needs no configuration. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/fencelock/fencelock/bench/internal/checkrun"
	"github.com/fencelock/fencelock/bench/internal/cli"
	"github.com/fencelock/fencelock/bench/internal/perf"
	"github.com/fencelock/fencelock/bench/internal/safety"
)

const usage = "usage: " + perf.Usage + "\n       " + safety.Usage + "\n       " + checkrun.Usage

func main() {
	if spec := os.Getenv(safety.WorkerEnv); spec != "" {
		// A child of `bench safety`: one cycle as holder A.
		if err := safety.RunWorker(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench safety worker:", err)
			os.Exit(1)
		}
		return
	}
	if spec := os.Getenv(checkrun.WaiterEnv); spec != "" {
		// A child of `bench check`: a waiter to freeze or to leave.
		if err := checkrun.RunWaiter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench check waiter:", err)
			os.Exit(1)
		}
		return
	}
	if spec := os.Getenv(checkrun.LeaderEnv); spec != "" {
		// A child of `bench check`: a leader of the election workload.
		if err := checkrun.RunLeader(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench check leader:", err)
			os.Exit(1)
		}
		return
	}
	if spec := os.Getenv(checkrun.SemWriterEnv); spec != "" {
		// A child of `bench check`: a writer of the semaphore workload.
		if err := checkrun.RunSemWriter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench check semaphore writer:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "perf":
		err = perf.Run(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "safety":
		rep, serr := safety.Run(ctx, os.Args[2:], os.Stdout, os.Stderr)
		if err = serr; err == nil && len(rep.Violations) > 0 {
			stop()
			os.Exit(3)
		}
	case "check":
		rep, cerr := checkrun.Run(ctx, os.Args[2:], os.Stdout, os.Stderr)
		if err = cerr; err == nil && len(rep.Violations()) > 0 {
			stop()
			os.Exit(3)
		}
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if code := exitStatus(err); code != 0 {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		if code == 2 {
			fmt.Fprintf(os.Stderr, "Run 'go run ./bench %s -h' for usage.\n", os.Args[1])
		}
		stop()
		os.Exit(code)
	}
}

// exitStatus is the exit status for a command's error: 0 for none or -h
// (the help was printed), 2 for a usage error, as the fencelock command
// does, 1 for any other.
func exitStatus(err error) int {
	var usage *cli.UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2
	}
	return 1
}
