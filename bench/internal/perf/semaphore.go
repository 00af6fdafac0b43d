package perf

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// The semaphore rows: fencelock's lease.Semaphore against the naive one
// (SET NX PX over N slot keys in turn) and the raw lock, the floor.

// semPermits is N of every semaphore row.
const semPermits = 10

// semWorkers is the workers of sem_hotkey, on one semaphore.
const semWorkers = 64

// semaphores runs the semaphore scenarios on raw and the semaphores of
// locks.SemNames, built here on the run's single server:
// sem_uncontended and sem_cost as uncontended and cost do (raw is the
// floor), sem_hotkey as hotkey does (semWorkers workers on one semaphore;
// the ceiling is N sleepers), and sem_waiters (semWaiters).
func semaphores(ctx context.Context, run *runner, env *env, rep *report.Perf) ([]report.Result, error) {
	c := env.clients()
	raw, err := locks.New("raw", c, locks.Config{})
	if err != nil {
		return nil, err
	}
	ls := []*locks.Lock{raw}
	for _, name := range locks.SemNames {
		l, err := locks.NewSemaphore(name, c, semPermits, locks.Config{})
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		rep.Locks[name] = l.Note
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := uncontended(ctx, run, ls, "sem_uncontended")
	for i, l := range ls {
		run.step("sem_cost", l.Name, i+1, len(ls))
		out = append(out, costOf(ctx, run, env.serversOf(l), l, "sem_cost", run.sizes.costOps))
	}
	hot, ceiling := hotkey(ctx, run, ls, "sem_hotkey", semWorkers, semPermits)
	out = append(out, hot...)
	rep.Ceilings = append(rep.Ceilings, ceiling)
	for _, l := range ls {
		if !l.CanWait() {
			out = append(out, skipped(l.Name, "sem_waiters"))
			continue
		}
		out = append(out, semWaiters(ctx, run, env, l.Name))
	}
	for i := range out {
		if out[i].Lock != "raw" {
			out[i].Permits = semPermits
		}
	}
	return out, ctx.Err()
}

// semWaiters measures how long sz.waiters waiters take to get a permit
// each, once: semPermits holders take every permit of one semaphore, the
// waiters queue in its waiting acquire (each takes a permit and releases
// it at once), and after sz.waitSettle the holders release. The figures
// are the time from the holders' release to the last waiter's Release
// returning, and the commands the server ran meanwhile per waiter. The
// semaphore is built afresh on clients of its own, closed afterwards.
func semWaiters(ctx context.Context, run *runner, e *env, name string) (res report.Result) {
	res = report.Result{Lock: name, Scenario: "sem_waiters"}
	sz := run.sizes
	var errs errorLog
	defer errs.fill(&res) // res is the named result: the fill reaches the caller
	c, closeClients := e.fresh(fmt.Sprintf("bench-%s-semwaiters-%s", run.id, name))
	defer closeClients()
	l, err := locks.NewSemaphore(name, c, semPermits, locks.Config{})
	if err != nil {
		errs.add(err)
		return res
	}
	defer l.Close() // before closeClients
	servers := []redis.UniversalClient{e.single}
	run.step("sem_waiters", l.Name, 0, sz.waiters)

	cctx, cancel := context.WithTimeout(ctx, waitCap)
	defer cancel()
	relCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	}
	key := run.key(l, "semwaiters", 0)
	var held []locks.Hold
	var inUse atomic.Int32 // permits held right now, by the bench's count
	for range semPermits {
		h, err := l.Try(cctx, key)
		if err != nil {
			errs.add(fmt.Errorf("holder: %w", err))
			continue
		}
		held = append(held, h)
		inUse.Add(1)
	}

	var got atomic.Int64
	var last atomic.Int64 // Unix ns of the latest Release returned
	var wg sync.WaitGroup
	for range sz.waiters {
		wg.Go(func() {
			h, err := l.Wait(cctx, key)
			if err != nil {
				errs.add(fmt.Errorf("waiter: %w", err))
				return
			}
			if n := inUse.Add(1); n > semPermits {
				errs.add(fmt.Errorf("%d holders at once, %d permits", n, semPermits))
			}
			inUse.Add(-1)
			rctx, rcancel := relCtx()
			defer rcancel()
			if err := h.Release(rctx); err != nil {
				errs.add(fmt.Errorf("waiter release: %w", err))
			}
			at := time.Now().UnixNano()
			for {
				if prev := last.Load(); at <= prev || last.CompareAndSwap(prev, at) {
					break
				}
			}
			if n := got.Add(1); n%100 == 0 {
				run.step("sem_waiters", l.Name, int(n), sz.waiters)
			}
		})
	}
	select {
	case <-time.After(sz.waitSettle):
	case <-cctx.Done():
	}
	early := got.Load() // waiters that got a permit before any release: an error, counted above
	before, err := commandStats(cctx, servers)
	if err != nil {
		errs.add(err)
	}

	released := time.Now()
	var hw sync.WaitGroup
	for _, h := range held {
		hw.Go(func() {
			inUse.Add(-1)
			rctx, rcancel := relCtx()
			defer rcancel()
			if err := h.Release(rctx); err != nil {
				errs.add(fmt.Errorf("holder release: %w", err))
			}
		})
	}
	hw.Wait()
	wg.Wait()
	after, aerr := commandStats(cctx, servers)

	n := int(got.Load())
	res.Samples, res.Workers, res.Keys = n, sz.waiters, 1
	if n == sz.waiters && early == 0 {
		res.AllAcquiredMs = report.Ptr(float64(time.Unix(0, last.Load()).Sub(released).Microseconds()) / 1e3)
	}
	if err == nil && aerr == nil && n > 0 {
		res.Commands = map[string]float64{}
		total := int64(0)
		for cmd, calls := range after {
			if d := calls - before[cmd]; d > 0 && cmd != "info" { // INFO: the bench's own reads
				res.Commands[cmd] = float64(d) / float64(n)
				total += d
			}
		}
		res.CmdsPerOp = report.Ptr(float64(total) / float64(n))
	}
	res.Note = fmt.Sprintf("%d waiters on one semaphore of %d permits, all held, waiting %v; then released: the time until every waiter got a permit and released it, and the server's commands meanwhile per waiter; %d of %d got one",
		sz.waiters, semPermits, sz.waitSettle, n, sz.waiters)
	return res
}
