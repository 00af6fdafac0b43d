// Command bench measures fencelock against the Redis floor and its peers:
// speed (perf) and what the protected data suffers under failures (safety).
//
//	go run ./bench perf [-quick] [-json FILE] [-html FILE] [-redis-url URL[,URL...]] [-database-url URL]
//	go run ./bench safety [-quick] [-json FILE] [-html FILE] [-scenario NAME,...] [-locks KIND,...] [-database-url URL]
//
// safety exits with status 3 when a must-hold rule is broken: a fenced lock
// kind lost an update or accepted a stale write, or a scenario provoked no
// anomaly in an unfenced kind.
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
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	if spec := os.Getenv(workerEnv); spec != "" {
		// A child of `bench safety`: one cycle as holder A.
		if err := runWorkerProcess(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench safety worker:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	const usage = `usage: go run ./bench perf [-quick] [-json FILE] [-html FILE] [-redis-url URL] [-database-url URL]
       go run ./bench safety [-quick] [-json FILE] [-html FILE] [-scenario NAME,...] [-locks KIND,...] [-database-url URL]`
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "perf":
		err = perf(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "safety":
		var rep *SafetyReport
		rep, err = safety(ctx, os.Args[2:], os.Stdout, os.Stderr)
		if err == nil && len(rep.Violations) > 0 {
			os.Exit(3)
		}
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		}
		os.Exit(1)
	}
}

// scenarioNames is every scenario group, in run order ("pg" runs
// pg_unguarded and pg_guarded).
var scenarioNames = []string{"uncontended", "parallel", "wake", "hotkey", "hotkey64", "waiters", "pg"}

// perf runs `bench perf` with args, printing the table to stdout and the
// progress line to stderr.
func perf(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small samples: a smoke run in under a minute, not figures to quote")
	jsonFile := fs.String("json", "", "write the results as JSON to `FILE`")
	htmlFile := fs.String("html", "", "write a self-contained HTML report with bar charts to `FILE`")
	redisURL := fs.String("redis-url", os.Getenv("REDIS_URL"),
		"Redis to use (default $REDIS_URL, else throwaway servers); give 5 comma-separated URLs of independent servers for the quorum locks, else they get throwaway servers")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL for the pg scenarios (default $DATABASE_URL, else a throwaway server)")
	lockList := fs.String("locks", strings.Join(lockNames, ","), "comma-separated locks to run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE` (for go tool pprof)")
	scenList := fs.String("scenarios", strings.Join(scenarioNames, ","), "comma-separated scenarios to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	names, err := pick(*lockList, lockNames)
	if err != nil {
		return fmt.Errorf("-locks: %w", err)
	}
	scens, err := pick(*scenList, scenarioNames)
	if err != nil {
		return fmt.Errorf("-scenarios: %w", err)
	}

	run := newRunner(stderr, *quick)
	start := time.Now()
	run.status("starting servers")
	env, err := setup(ctx, *redisURL, *dbURL, names, slices.Contains(scens, "pg"))
	if err != nil {
		return err
	}
	defer env.close()

	var locks []locker
	defer func() {
		for _, l := range locks {
			l.free()
		}
	}()
	for _, n := range names {
		l, err := newLocker(n, env.clients())
		if err != nil {
			return err
		}
		locks = append(locks, l)
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	rep := newReport(fs, *quick, env)
	rep.Locks = map[string]string{}
	for _, l := range locks {
		rep.Locks[l.name] = l.note
	}
	for _, s := range scens {
		switch s {
		case "uncontended":
			rep.Results = append(rep.Results, uncontended(ctx, run, locks)...)
		case "parallel":
			rep.Results = append(rep.Results, parallel(ctx, run, locks)...)
		case "wake":
			for _, l := range locks {
				rep.Results = append(rep.Results, wake(ctx, run, l))
			}
		case "hotkey", "hotkey64":
			for _, h := range hotkeyRuns {
				if h.scenario != s {
					continue
				}
				for _, l := range locks {
					rep.Results = append(rep.Results, hotkey(ctx, run, l, h.scenario, h.workers))
				}
			}
		case "waiters":
			for _, l := range locks {
				rep.Results = append(rep.Results, waiters(ctx, run, env, l))
			}
		case "pg":
			rs, version, err := pgBench(ctx, run, env.dsn)
			if err != nil {
				return err
			}
			rep.Machine.Postgres = version
			rep.Results = append(rep.Results, rs...)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	run.done()
	env.cleanup(run.id)
	rep.Targets = targets(rep.Results)

	writeTable(stdout, rep)
	if *jsonFile != "" {
		if err := writeJSON(*jsonFile, rep); err != nil {
			return err
		}
	}
	if *htmlFile != "" {
		if err := writeHTML(*htmlFile, rep); err != nil {
			return err
		}
	}
	return nil
}

// pick parses a comma-separated list of names, each of which must be known,
// and returns them in the order of known.
func pick(list string, known []string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown %q (known: %s)", n, strings.Join(known, ","))
		}
		want[n] = true
	}
	var out []string
	for _, n := range known {
		if want[n] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}
