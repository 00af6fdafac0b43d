package perf

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// cost measures what one uncontended acquire+release costs, each lock
// alone, after a warm-up: the bench process's allocations and bytes
// (runtime.MemStats) and the commands the lock's servers ran (INFO
// commandstats, summed over its nodes). Neither figure depends on the
// machine's load. One key is taken again and again, as a job takes its
// lock (a lock's first acquisition reads the server's clock for its new
// counter: one command more), and one context serves the batch, so the
// bench's own share is the adapter's Hold (one allocation per op).
func cost(ctx context.Context, run *runner, env *env, ls []*locks.Lock) []report.Result {
	n := run.sizes.costOps
	out := make([]report.Result, len(ls))
	for i, l := range ls {
		run.step("cost", l.Name, i+1, len(ls))
		out[i] = costOf(ctx, run, env.serversOf(l), l, "cost", n)
	}
	return out
}

// costOf is cost for one lock, on its servers, as scenario's result (cost,
// or the semaphores' sem_cost).
func costOf(ctx context.Context, run *runner, servers []redis.UniversalClient, l *locks.Lock, scenario string, n int) report.Result {
	r := report.Result{Lock: l.Name, Scenario: scenario,
		Note: fmt.Sprintf("%d acquire+release one at a time on one key, alone after a warm-up on it; allocations of the bench process, commands summed over the lock's %s",
			n, report.Plural(len(servers), "server"))}
	var errs errorLog
	k := run.key(l, "cost", 0)
	for range 20 { // connections, script cache, the lock's counter, its lazy setup
		if err := acquireRelease(ctx, l, k); err != nil {
			errs.add(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout+runTimeout(n))
	defer cancel()
	before, err := commandStats(ctx, servers)
	if err != nil {
		errs.add(err)
		errs.fill(&r)
		return r
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	ok := 0
	for range n {
		h, err := l.Try(ctx, k)
		if err == nil {
			err = h.Release(ctx)
		}
		if err != nil {
			errs.add(err)
			continue
		}
		ok++
	}
	runtime.ReadMemStats(&m1)
	after, err := commandStats(ctx, servers)
	if err != nil {
		errs.add(err)
	}
	errs.fill(&r)
	r.Samples = ok
	if ok < n || err != nil {
		return r // a failed op costs less than one that worked: no figure
	}
	per := func(v uint64) *float64 { return report.Ptr(float64(v) / float64(n)) }
	r.AllocsPerOp, r.BytesPerOp = per(m1.Mallocs-m0.Mallocs), per(m1.TotalAlloc-m0.TotalAlloc)
	r.Commands = map[string]float64{}
	total := int64(0)
	for name, calls := range after {
		if d := calls - before[name]; d > 0 && name != "info" { // INFO: the bench's own reads
			r.Commands[name] = float64(d) / float64(n)
			total += d
		}
	}
	r.CmdsPerOp = report.Ptr(float64(total) / float64(n))
	return r
}

// runTimeout is a generous bound on n sequential acquire+releases.
func runTimeout(n int) time.Duration { return time.Duration(n) * 50 * time.Millisecond }

// commandStats sums the calls of each command over servers, from INFO
// commandstats ("cmdstat_evalsha:calls=2,usec=..."). Commands a script runs
// count too.
func commandStats(ctx context.Context, servers []redis.UniversalClient) (map[string]int64, error) {
	calls := map[string]int64{}
	for _, s := range servers {
		info, err := s.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats: %w", err)
		}
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			name, found := strings.CutPrefix(name, "cmdstat_")
			if !ok || !found {
				continue
			}
			v, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			calls[name] += c
		}
	}
	return calls, nil
}
