// Package checkrun is `bench check`: N clients per lock kind run
// lock-guarded increments of registers and appends to sets in PostgreSQL
// while a nemesis injects the safety faults on a schedule drawn from a
// seed; every operation is recorded and the history is checked against a
// fenced-mutex model, for lost updates, and for linearizability
// (package check).
package checkrun

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/cli"
	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/safety"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// Run runs `bench check` with args: the table to stdout, progress to
// stderr. A run that breaks a must-hold rule is not an error here: see
// [Report.Violations].
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) (*Report, error) {
	o, err := parse(args, stderr)
	if err != nil {
		return nil, cli.Usage(err) // every error of parse is one of the flags'
	}
	return run(ctx, o, stdout, stderr)
}

// env is what every kind's run shares.
type env struct {
	o        *options
	dsn      string
	db       *pgxpool.Pool // setup and the final read
	pgTCP    string        // Postgres's TCP address ("" over a socket: no delayed writes)
	given    []*redis.Options
	runID    string
	sched    []check.Window
	progress *report.Progress
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) (*Report, error) {
	start := time.Now()
	e := &env{o: o, runID: fmt.Sprintf("%08x", rand.Uint32()), progress: report.NewProgress(stderr, "check", 10*time.Second)}
	var err error
	if e.sched, err = check.Schedule(o.plan); err != nil {
		return nil, err
	}
	if o.redisURL != "" {
		for _, u := range strings.Split(o.redisURL, ",") {
			opt, err := redis.ParseURL(strings.TrimSpace(u))
			if err != nil {
				return nil, fmt.Errorf("-redis-url: %w", err)
			}
			e.given = append(e.given, opt)
		}
	}
	e.progress.Step("starting postgres", "")
	e.dsn = o.dbURL
	if e.dsn == "" {
		p, err := testenv.StartPostgres(ctx)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w (or set -database-url)", err)
		}
		defer p.Close()
		e.dsn = p.DSN()
	}
	if e.db, err = pgxpool.New(ctx, e.dsn); err != nil {
		return nil, err
	}
	defer e.db.Close()
	if err := prepareDB(ctx, e.db); err != nil {
		return nil, err
	}
	if o.dbURL != "" {
		defer dropResources(context.WithoutCancel(ctx), e.db, "check-"+e.runID)
	}
	e.pgTCP, _ = safety.PgAddr(e.dsn)

	rep := &Report{Header: report.NewHeader("check", o.fs, o.quick), Seed: o.seed, Replay: o.commandLine(),
		Clients: o.clients, Duration: o.duration.String(), TTL: o.ttl.String()}
	rep.Machine.Servers = map[bool]string{true: "given redis", false: "throwaway redis"}[e.given != nil] +
		map[bool]string{true: ", given postgres", false: ", throwaway postgres"}[o.dbURL != ""]
	e.db.QueryRow(ctx, "SHOW server_version").Scan(&rep.Machine.Postgres)
	for _, info := range append(append(safety.CheckKinds(), electionInfo), semaphoreInfos...) {
		if !slices.Contains(o.locks, info.Name) {
			continue
		}
		var k Kind
		switch {
		case info.Name == kindElection:
			k = e.runElection(ctx, info)
		case isSemaphore(info.Name):
			k = e.runSemaphore(ctx, info)
		default:
			k = e.runKind(ctx, info)
		}
		rep.Kinds = append(rep.Kinds, k)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	e.progress.Done()
	if err := rep.writeText(stdout); err != nil {
		return rep, err
	}
	return rep, rep.writeFiles(o)
}

// runKind runs one lock kind: its servers, its clients and the nemesis for
// the run's duration, then the final read and the checkers.
func (e *env) runKind(ctx context.Context, info report.LockInfo) Kind {
	o := e.o
	k := Kind{Lock: info}
	fail := func(err error) Kind {
		k.Error = err.Error()
		k.Summary = check.Summarize(info.Name, info.Fenced, o.seed, check.History{}, nil)
		return k
	}
	e.progress.Step(info.Name, "starting servers")
	nem := &nemesis{skip: map[check.Fault]string{}}
	var opts []*redis.Options
	if len(e.given) >= info.Nodes {
		opts = e.given[:info.Nodes]
		for _, f := range []check.Fault{check.FaultRestartRedis, check.FaultFailover, check.FaultPauseRedis, check.FaultEarlyExpiry, check.FaultEvict} {
			nem.skip[f] = "the Redis servers were given (-redis-url): node faults would destroy their data"
		}
	} else {
		// A node fault hits the one node, or a majority of five.
		hit := info.Nodes/2 + 1
		topo, err := safety.StartTopology(ctx, info.Nodes, func(i int) bool { return i < hit })
		if err != nil {
			return fail(fmt.Errorf("starting redis: %w", err))
		}
		defer topo.Close()
		for i, s := range topo.Sites() {
			opts = append(opts, &redis.Options{Addr: s.Addr()})
			if i < hit {
				nem.sites = append(nem.sites, s)
			}
		}
	}
	if e.pgTCP == "" {
		nem.skip[check.FaultDelayWrite] = "PostgreSQL is reached over a Unix socket: no proxy to delay"
	}
	gs := groupsFor(e.runID, info.Name)
	if fairLease(info) {
		// The waiter processes take the lanes after the clients'.
		w, err := newWaiters(opts[0], o.ttl, o.clients, gs)
		if err != nil {
			return fail(err)
		}
		defer w.close()
		nem.w = w
	} else {
		for _, f := range []check.Fault{check.FaultPauseWaiter, check.FaultLeaveQueue} {
			nem.skip[f] = "no fair queue (fencelock's lease kinds only)"
		}
	}
	res := resourcesOf(gs)
	if err := newResources(ctx, e.db, res); err != nil {
		return fail(err)
	}

	clients, err := e.newClients(ctx, info, opts, gs)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	if err != nil {
		return fail(err)
	}
	// The schedule and the history start now.
	t0 := time.Now()
	rec := check.NewRecorderClock(t0, func() time.Duration { return time.Since(t0) })
	for _, c := range clients {
		c.rec = rec
	}
	nem.clients, nem.t0, nem.rec = clients, t0, rec

	stopCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); c.run(ctx, stopCtx) }()
	}
	var applied, skipped []check.Window
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); applied, skipped = nem.run(stopCtx, e.sched) }()
	tick := time.NewTicker(time.Second)
	for stopCtx.Err() == nil {
		select {
		case <-tick.C:
			e.progress.Step(info.Name, fmt.Sprintf("%3.0fs/%v", time.Since(t0).Seconds(), o.duration))
		case <-stopCtx.Done():
		}
	}
	tick.Stop()
	<-nemDone
	e.progress.Step(info.Name, "stopping clients")
	wg.Wait()
	for _, c := range clients {
		k.AcquireFailures += c.noLock.Load()
		k.Pauses += c.paused.Load()
		if p := c.lastNo.Load(); p != nil {
			k.LastAcquireError = *p
		}
		c.close()
	}
	clients = nil
	h := rec.History()

	e.progress.Step(info.Name, "checking")
	final, err := readFinal(ctx, e.db, res)
	if err != nil {
		return fail(err)
	}
	results := []check.Result{
		check.CheckFencedMutex(h),
		check.CheckLostUpdates(h, final, nil),
		check.CheckLinearizable(h, check.LinearOptions{Timeout: o.linearTimeout}),
	}
	if info.Family == locks.Fencelock {
		// The lock's own properties, on the kinds whose leases have a
		// local deadline (fencelock's).
		results = append(results, check.CheckExclusion(h, applied))
	}
	if nem.w != nil {
		results = append(results, check.CheckLiveness(h, applied, check.LivenessOptions{TTL: o.ttl, TicketTTL: ticketTTL}))
	}
	if nem.w != nil {
		st := nem.w.Stats()
		k.Waiters = &st
	}
	k.Run = check.Run{
		Summary:  check.Summarize(info.Name, info.Fenced, o.seed, h, applied, results...),
		Schedule: applied, Results: results, Final: final, History: h,
	}
	k.Skipped = skipped
	return k
}

// fairLease reports whether kind runs on fencelock's lease, fair by
// default: the kinds the waiter-process faults apply to.
func fairLease(info report.LockInfo) bool { return info.Family == locks.Fencelock && info.Nodes == 1 }

// newClients makes the kind's clients, each with its own Redis
// connections, its own Postgres connection (through its own proxy, when
// Postgres is on TCP) and a verifier on it.
func (e *env) newClients(ctx context.Context, info report.LockInfo, opts []*redis.Options, gs []group) ([]*client, error) {
	o := e.o
	var out []*client
	for i := range o.clients {
		lc, err := safety.NewLockClient(info.Name, opts, o.ttl)
		if err != nil {
			return out, err
		}
		c := &client{id: i, fenced: lc.Fenced(), lock: lc, groups: gs,
			rng:   rand.New(rand.NewPCG(uint64(o.seed), uint64(i))),
			think: [2]time.Duration{5 * time.Millisecond, 25 * time.Millisecond},
			wait:  max(2*time.Second, 4*o.ttl), opTime: 15 * time.Second}
		addr := ""
		if e.pgTCP != "" {
			if c.proxy, err = faults.StartProxy(e.pgTCP); err != nil {
				lc.Close()
				return out, err
			}
			addr = c.proxy.Addr()
		}
		if c.db, err = clientPool(ctx, e.dsn, addr); err != nil {
			lc.Close()
			if c.proxy != nil {
				c.proxy.Close()
			}
			return out, err
		}
		out = append(out, c)
		if c.ver, err = pgverifier.New(c.db); err != nil {
			return out, err
		}
	}
	return out, nil
}
