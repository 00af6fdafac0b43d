// Package perf is `bench perf`: how fast fencelock's locks are against the
// Redis floor and the peer libraries, scenario by scenario.
package perf

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/fencelock/fencelock/bench/internal/cli"
	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/servers"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// Scenarios is every scenario group, in run order ("semaphore" runs
// sem_uncontended, sem_cost, sem_hotkey and sem_waiters on raw and the
// semaphores of locks.SemNames, whatever -locks says; "pg" runs pg_unguarded,
// pg_guarded, pg_guarded_withtx with pgverifier and pg_perrow; "sql" runs
// sql_unguarded, sql_guarded, sql_guarded_withtx with sqlverifier and
// sql_perrow on MariaDB and on PostgreSQL).
var Scenarios = []string{"uncontended", "cost", "parallel", "wake", "hotkey", "hotkey64", "waiters", "semaphore", "pg", "sql"}

// Usage is the synopsis of `bench perf`.
const Usage = "go run ./bench perf [-quick] [-json FILE] [-html FILE] [-redis-url URL[,URL...]] [-database-url URL] [-mysql-dsn DSN] [-locks KIND,...] [-scenarios NAME,...] [-servers KIND,...]"

// Run runs `bench perf` with args, printing the table to stdout and the
// progress to stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small samples: a smoke run in under a minute, not figures to quote")
	jsonFile := fs.String("json", "", "write the results as JSON to `FILE`")
	htmlFile := fs.String("html", "", "write a self-contained HTML report with bar charts to `FILE`")
	redisURL := fs.String("redis-url", os.Getenv("REDIS_URL"),
		"Redis to use (default $REDIS_URL, else throwaway servers); give 5 comma-separated URLs of independent servers for the quorum locks, else they get throwaway servers")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL for the pg scenarios (default $DATABASE_URL, else a throwaway server)")
	mysqlDSN := fs.String("mysql-dsn", os.Getenv("MYSQL_DSN"), "MariaDB/MySQL (go-sql-driver DSN) for the sql scenario (default $MYSQL_DSN, else a throwaway MariaDB)")
	lockList := fs.String("locks", strings.Join(locks.Names, ","), "comma-separated locks to run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE` (for go tool pprof)")
	scenList := fs.String("scenarios", strings.Join(Scenarios, ","), "comma-separated scenarios to run")
	serverList := fs.String("servers", "", serversUsage)
	if err := fs.Parse(args); err != nil {
		return cli.Usage(err)
	}
	if fs.NArg() > 0 {
		return cli.Usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	names, err := cli.Pick(*lockList, locks.Names)
	if err != nil {
		return cli.Usage(fmt.Errorf("-locks: %w", err))
	}
	scens, err := cli.Pick(*scenList, Scenarios)
	if err != nil {
		return cli.Usage(fmt.Errorf("-scenarios: %w", err))
	}
	kinds, serversNote, err := pickServers(*serverList, *redisURL != "")
	if err != nil {
		return cli.Usage(fmt.Errorf("-servers: %w", err))
	}

	run := newRunner(stderr, *quick)
	start := time.Now()
	run.status("starting servers")
	sqlOn := slices.Contains(scens, "sql")
	env, err := setup(ctx, servers.Binary(kinds[0]), *redisURL, *dbURL, *mysqlDSN, names, slices.Contains(scens, "pg") || sqlOn, sqlOn)
	if err != nil {
		return err
	}
	defer env.close()

	var ls []*locks.Lock
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for _, n := range names {
		l, err := locks.New(n, env.clients(), locks.Config{})
		if err != nil {
			return err
		}
		ls = append(ls, l)
	}
	var others []string
	if ls, others, err = env.startOthers(ctx, kinds[1:], ls); err != nil {
		return err
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

	rep := &report.Perf{Header: report.NewHeader("perf", fs, *quick), Locks: map[string]string{}}
	rep.Machine.Redis, rep.Machine.Servers, rep.Machine.Others = env.redisVer, env.where, others
	if serversNote != "" {
		rep.Notes = append(rep.Notes, serversNote)
	}
	for _, l := range ls {
		rep.Locks[l.Name] = l.Note
	}
	for _, s := range scens {
		rs, err := runScenario(ctx, s, run, env, ls, rep)
		if err != nil {
			return err
		}
		pairOnServer(rs)
		rep.Results = append(rep.Results, rs...)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	run.done()
	env.cleanup(run.id)
	rep.Targets = targets(rep.Results, rep.Ceilings)

	report.WritePerfTable(stdout, rep)
	if *jsonFile != "" {
		if err := report.WriteJSON(*jsonFile, rep); err != nil {
			return err
		}
	}
	if *htmlFile != "" {
		return report.WritePerfHTML(*htmlFile, rep)
	}
	return nil
}

// runScenario runs scenario group s over every lock.
func runScenario(ctx context.Context, s string, run *runner, env *env, ls []*locks.Lock, rep *report.Perf) ([]report.Result, error) {
	var out []report.Result
	switch s {
	case "uncontended":
		out = uncontended(ctx, run, ls, s)
	case "cost":
		out = cost(ctx, run, env, ls)
	case "parallel":
		out = parallel(ctx, run, ls)
	case "wake":
		out = wake(ctx, run, ls)
	case "hotkey", "hotkey64":
		rs, ceiling := hotkey(ctx, run, ls, s, hotkeyWorkers[s], 1)
		out = rs
		rep.Ceilings = append(rep.Ceilings, ceiling)
	case "waiters": // each lock alone, one after the other: not interleaved
		for _, l := range ls {
			if _, kind := locks.SplitServer(l.Name); kind != "" {
				continue // its clients, named for CLIENT LIST, are on the first server
			}
			out = append(out, waiters(ctx, run, env, l))
		}
	case "semaphore": // its own locks: raw, fencelock's semaphore, the naive one
		return semaphores(ctx, run, env, rep)
	case "pg":
		rs, version, err := pgBench(ctx, run, env.dsn)
		if err != nil {
			return nil, err
		}
		rep.Machine.Postgres = version
		out = rs
	case "sql":
		for _, db := range []struct {
			lock, driver, dsn string
			d                 sqlverifier.Dialect
		}{{"mariadb", "mysql", env.mysqlDSN, sqlverifier.MySQL}, {"postgres-sql", "pgx", env.dsn, sqlverifier.Postgres}} {
			rs, version, err := sqlBench(ctx, run, db.lock, db.driver, db.dsn, db.d)
			if err != nil {
				return nil, err
			}
			if db.d == sqlverifier.MySQL {
				rep.Machine.MySQL = version
			}
			out = append(out, rs...)
		}
	}
	return out, nil
}
