package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/internal/testenv"
)

// safetyOptions is `bench safety`'s flags.
type safetyOptions struct {
	quick     bool
	jsonFile  string
	htmlFile  string
	scenarios []string
	locks     []string
	rounds    int
	extra     int
	ttl       time.Duration
	dbURL     string
	command   string
}

func parseSafety(args []string, stderr io.Writer) (*safetyOptions, error) {
	fs := flag.NewFlagSet("safety", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	for _, s := range safetyScenarios {
		names = append(names, s.info.Name)
	}
	var kinds []string
	for _, k := range safetyKinds {
		kinds = append(kinds, k.Name)
	}
	o := &safetyOptions{}
	fs.BoolVar(&o.quick, "quick", false, "one round per cell and a 500ms TTL: a smoke run in under 3 minutes")
	fs.StringVar(&o.jsonFile, "json", "", "write the results as JSON to `FILE`")
	fs.StringVar(&o.htmlFile, "html", "", "write an HTML matrix of scenario × lock kind to `FILE`")
	scen := fs.String("scenario", strings.Join(names, ","), "comma-separated scenarios to run")
	lockList := fs.String("locks", strings.Join(kinds, ","), "comma-separated lock kinds to run")
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
	if o.scenarios, err = pick(*scen, names); err != nil {
		return nil, fmt.Errorf("-scenario: %w", err)
	}
	if o.locks, err = pick(*lockList, kinds); err != nil {
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
	cmd := []string{"go run ./bench safety"}
	fs.Visit(func(f *flag.Flag) {
		switch {
		case strings.HasSuffix(f.Name, "-url"):
			cmd = append(cmd, "-"+f.Name+"=…")
		case f.Name == "quick":
			cmd = append(cmd, "-quick")
		default:
			cmd = append(cmd, "-"+f.Name+" "+f.Value.String())
		}
	})
	o.command = strings.Join(cmd, " ")
	return o, nil
}

// safety runs `bench safety` with args: the table to stdout, progress to
// stderr. It returns the report; a run that breaks a must-hold rule is not
// an error here (the caller decides the exit status).
func safety(ctx context.Context, args []string, stdout, stderr io.Writer) (*SafetyReport, error) {
	o, err := parseSafety(args, stderr)
	if err != nil {
		return nil, err
	}
	return runSafety(ctx, o, stdout, stderr)
}

func runSafety(ctx context.Context, o *safetyOptions, stdout, stderr io.Writer) (*SafetyReport, error) {
	start := time.Now()
	var mu sync.Mutex
	last := 0
	status := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("safety %6.1fs  %s", time.Since(start).Seconds(), msg)
		fmt.Fprintf(stderr, "\r%s%*s", line, max(0, last-len(line)), "")
		last = len(line)
	}

	status("starting postgres")
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
	if err := prepareSafetyDB(ctx, db); err != nil {
		return nil, err
	}
	cfg := &safetyConfig{ttl: o.ttl, rounds: o.rounds, extra: o.extra,
		runID: fmt.Sprintf("%08x", rand.Uint32()), dsn: dsn, db: db, status: status}
	if given {
		defer dropResources(context.WithoutCancel(ctx), db, "safety-"+cfg.runID)
	}

	rep := &SafetyReport{Command: o.command, Timestamp: time.Now().UTC().Format(time.RFC3339), Quick: o.quick,
		Machine:  Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version(), Servers: "throwaway redis"},
		Versions: versions(), TTL: o.ttl.String(), Rounds: o.rounds, Extra: o.extra}
	if given {
		rep.Machine.Servers = "throwaway redis, given postgres"
	}
	db.QueryRow(ctx, "SHOW server_version").Scan(&rep.Machine.Postgres)
	rep.Machine.Redis = redisVersion(ctx)

	seen := map[string]bool{}
	for _, name := range o.scenarios {
		sc, _ := scenarioNamed(name)
		rep.Scenarios = append(rep.Scenarios, sc.info)
		for _, k := range sc.kinds(o.locks) {
			info, _ := kindInfo(k)
			if !seen[k] {
				seen[k] = true
			}
			rep.Results = append(rep.Results, runCell(ctx, cfg, sc, info))
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range safetyKinds {
		if seen[k.Name] {
			rep.Locks = append(rep.Locks, k)
		}
	}
	rep.check()
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	mu.Lock()
	fmt.Fprintf(stderr, "\r%*s\rsafety: done in %.1fs\n", last, "", time.Since(start).Seconds())
	mu.Unlock()

	writeSafetyTable(stdout, rep)
	if o.jsonFile != "" {
		if err := writeSafetyJSON(o.jsonFile, rep); err != nil {
			return rep, err
		}
	}
	if o.htmlFile != "" {
		if err := writeSafetyHTML(o.htmlFile, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// redisVersion is the version of the redis-server the scenarios start.
func redisVersion(ctx context.Context) string {
	r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
	if err != nil {
		return "unknown"
	}
	defer r.Close()
	c := r.Client()
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}
