// Package safety is `bench safety`: each failure of Kleppmann's "How to do
// distributed locking" provoked for real against each lock kind, and a
// checker that counts what the protected PostgreSQL data suffered.
package safety

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/bench/internal/cli"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/servers"
	"github.com/fencelock/fencelock/internal/testenv"
)

// Usage is the synopsis of `bench safety`.
const Usage = "go run ./bench safety [-quick] [-json FILE] [-html FILE] [-scenario NAME,...] [-locks KIND,...] [-rounds N] [-extra N] [-ttl D] [-database-url URL]"

// options is `bench safety`'s flags.
type options struct {
	quick     bool
	jsonFile  string
	htmlFile  string
	scenarios []string
	locks     []string
	rounds    int
	extra     int
	ttl       time.Duration
	dbURL     string
	fs        *flag.FlagSet
	command   string
}

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("safety", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{fs: fs}
	fs.BoolVar(&o.quick, "quick", false, "one round per cell and a 500ms TTL: a smoke run in under 3 minutes")
	fs.StringVar(&o.jsonFile, "json", "", "write the results as JSON to `FILE`")
	fs.StringVar(&o.htmlFile, "html", "", "write an HTML matrix of scenario × lock kind to `FILE`")
	scen := fs.String("scenario", strings.Join(scenarioNames(), ","), "comma-separated scenarios to run")
	lockList := fs.String("locks", strings.Join(kindNames(), ","), "comma-separated lock kinds to run")
	rounds := fs.Int("rounds", 0, "faulted rounds per cell (default 3, or 1 with -quick)")
	extra := fs.Int("extra", 0, "unfaulted cycles after each round (default 2, or 1 with -quick)")
	ttl := fs.Duration("ttl", 0, "lock TTL (default 1s, or 500ms with -quick)")
	fs.StringVar(&o.dbURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL for the data (default $DATABASE_URL, else a throwaway server); Redis servers are always throwaway: the scenarios kill them")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.scenarios, err = cli.Pick(*scen, scenarioNames()); err != nil {
		return nil, fmt.Errorf("-scenario: %w", err)
	}
	if o.locks, err = cli.Pick(*lockList, kindNames()); err != nil {
		return nil, fmt.Errorf("-locks: %w", err)
	}
	o.rounds, o.extra, o.ttl = 3, 2, time.Second
	if o.quick {
		o.rounds, o.extra, o.ttl = 1, 1, 500*time.Millisecond
	}
	if *rounds > 0 {
		o.rounds = *rounds
	}
	if *extra > 0 {
		o.extra = *extra
	}
	if *ttl > 0 {
		o.ttl = *ttl
	}
	if o.ttl < 100*time.Millisecond {
		return nil, fmt.Errorf("-ttl %v: at least 100ms", o.ttl)
	}
	o.command = report.CommandLine("safety", fs)
	return o, nil
}

// Run runs `bench safety` with args: the table to stdout, progress to
// stderr. It returns the report; a run that breaks a must-hold rule is not
// an error here (the caller decides the exit status).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) (*report.Safety, error) {
	o, err := parse(args, stderr)
	if err != nil {
		return nil, cli.Usage(err) // every error of parse is one of the flags'
	}
	return run(ctx, o, stdout, stderr)
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) (*report.Safety, error) {
	start := time.Now()
	progress := report.NewProgress(stderr, "safety", 0)
	progress.Step("starting postgres", "")
	dsn := o.dbURL
	given := dsn != ""
	if !given {
		p, err := testenv.StartPostgres(ctx)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w (or set -database-url)", err)
		}
		defer p.Close()
		dsn = p.DSN()
	}
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := prepareDB(ctx, db); err != nil {
		return nil, err
	}
	cfg := &config{ttl: o.ttl, rounds: o.rounds, extra: o.extra,
		runID: fmt.Sprintf("%08x", rand.Uint32()), dsn: dsn, db: db, status: progress.Step}
	if given {
		defer dropResources(context.WithoutCancel(ctx), db, "safety-"+cfg.runID)
	}

	rep := &report.Safety{Header: report.NewHeader("safety", o.fs, o.quick),
		TTL: o.ttl.String(), Rounds: o.rounds, Extra: o.extra}
	rep.Machine.Servers = "throwaway redis"
	if given {
		rep.Machine.Servers = "throwaway redis, given postgres"
	}
	db.QueryRow(ctx, "SHOW server_version").Scan(&rep.Machine.Postgres)
	rep.Machine.Redis = redisVersion(ctx)

	seen := map[string]bool{}
	for _, name := range o.scenarios {
		sc, _ := scenarioNamed(name)
		rep.Scenarios = append(rep.Scenarios, sc.info)
		for _, kn := range sc.kinds(o.locks) {
			k, _ := kindNamed(kn)
			seen[kn] = true
			rep.Results = append(rep.Results, runCell(ctx, cfg, sc, k))
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range kinds {
		if seen[k.Name] {
			rep.Locks = append(rep.Locks, k.LockInfo)
		}
	}
	rep.Check()
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	progress.Done()

	report.WriteSafetyTable(stdout, rep)
	if o.jsonFile != "" {
		if err := report.WriteJSON(o.jsonFile, rep); err != nil {
			return rep, err
		}
	}
	if o.htmlFile != "" {
		if err := report.WriteSafetyHTML(o.htmlFile, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// redisVersion names the server the scenarios start and its version:
// "redis 7.0.15", "valkey 8.0.1", or "unknown".
func redisVersion(ctx context.Context) string {
	r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
	if err != nil {
		return "unknown"
	}
	defer r.Close()
	c := r.Client()
	defer c.Close()
	s, err := servers.Identify(ctx, c)
	if err != nil {
		return "unknown"
	}
	return s.String()
}
