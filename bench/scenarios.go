package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// sizes says how much each scenario measures; quick and full runs differ
// only here.
type sizes struct {
	rounds      int           // uncontended and parallel: rounds, locks interleaved within each
	batch       int           // uncontended: sequential ops per lock per round
	slice       time.Duration // parallel: duration per lock per round
	workers     int           // parallel: goroutines
	wakeSamples int           // wake: samples per lock
	wakeBlock   [2]time.Duration
	hotDuration time.Duration // hotkey, hotkey64: duration per lock
	hotHold     time.Duration
	waiters     int           // waiters: goroutines waiting
	waiterKeys  int           // waiters: keys they wait on (waiters/waiterKeys each)
	waitSettle  time.Duration // waiters: from starting them to the first CLIENT LIST
	waitWindow  time.Duration // waiters: the window whose CPU time is measured
	pgRounds    int
	pgBatch     int
}

var (
	fullSizes = sizes{rounds: 10, batch: 500, slice: 400 * time.Millisecond, workers: 64,
		wakeSamples: 200, wakeBlock: [2]time.Duration{10 * time.Millisecond, 40 * time.Millisecond},
		hotDuration: 3 * time.Second, hotHold: time.Millisecond,
		waiters: 1000, waiterKeys: 100, waitSettle: time.Second, waitWindow: 2 * time.Second,
		pgRounds: 10, pgBatch: 200}
	quickSizes = sizes{rounds: 3, batch: 100, slice: 150 * time.Millisecond, workers: 64,
		wakeSamples: 20, wakeBlock: [2]time.Duration{5 * time.Millisecond, 15 * time.Millisecond},
		hotDuration: 600 * time.Millisecond, hotHold: time.Millisecond,
		waiters: 100, waiterKeys: 10, waitSettle: 300 * time.Millisecond, waitWindow: time.Second,
		pgRounds: 3, pgBatch: 50}
)

// opTimeout bounds each acquire+release, so a stuck server fails the run
// instead of hanging it.
const opTimeout = 5 * time.Second

// acquireRelease is one uncontended acquire (a single attempt) and release.
func acquireRelease(ctx context.Context, l locker, key string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rel, err := l.try(ctx, key)
	if err != nil {
		return err
	}
	return rel(ctx)
}

// uncontended measures sequential acquire+release latency on distinct keys.
// The locks take turns in batches, round after round, so that a change in
// the machine's load falls on all of them alike.
func uncontended(ctx context.Context, run *runner, locks []locker) []Result {
	sz := run.sizes
	samples := make([][]time.Duration, len(locks))
	errs := make([]errorLog, len(locks))
	for i, l := range locks { // warm up: connections, script cache
		for j := range 50 {
			if err := acquireRelease(ctx, l, run.key(l, "warm", j)); err != nil {
				errs[i].add(err)
			}
		}
	}
	for round := range sz.rounds {
		for i, l := range locks {
			run.progress("uncontended", l.name, round+1, sz.rounds)
			for j := range sz.batch {
				key := run.key(l, "u", j)
				t0 := time.Now()
				err := acquireRelease(ctx, l, key)
				d := time.Since(t0)
				if err != nil {
					errs[i].add(err)
					continue
				}
				samples[i] = append(samples[i], d)
			}
		}
	}
	out := make([]Result, len(locks))
	for i, l := range locks {
		out[i] = Result{Lock: l.name, Scenario: "uncontended"}
		errs[i].fill(&out[i])
		out[i].setLatency(samples[i])
	}
	return out
}

// parallel measures acquire+release throughput with many goroutines, each
// on its own key. Locks take turns in slices, as in uncontended.
func parallel(ctx context.Context, run *runner, locks []locker) []Result {
	sz := run.sizes
	ops := make([]int64, len(locks))
	errs := make([]errorLog, len(locks))
	spent := make([]time.Duration, len(locks))
	for round := range sz.rounds {
		for i, l := range locks {
			run.progress("parallel", l.name, round+1, sz.rounds)
			var n atomic.Int64
			stop := time.Now().Add(sz.slice)
			var wg sync.WaitGroup
			t0 := time.Now()
			for g := range sz.workers {
				wg.Go(func() {
					key := run.key(l, "p", g)
					for time.Now().Before(stop) {
						if err := acquireRelease(ctx, l, key); err != nil {
							errs[i].add(err)
							continue
						}
						n.Add(1)
					}
				})
			}
			wg.Wait()
			spent[i] += time.Since(t0)
			ops[i] += n.Load()
		}
	}
	out := make([]Result, len(locks))
	for i, l := range locks {
		out[i] = Result{Lock: l.name, Scenario: "parallel", Samples: int(ops[i]),
			OpsPerSec: ptr(float64(ops[i]) / spent[i].Seconds()),
			Note:      fmt.Sprintf("%d goroutines, distinct keys", sz.workers)}
		errs[i].fill(&out[i])
	}
	return out
}

// wake measures hand-off: a waiter is blocked in the library's own waiting
// acquire; the holder releases after a random delay (so that polling
// waiters are caught at every phase of their backoff); the sample is the
// time from the holder's Release returning to the waiter's acquire
// returning.
func wake(ctx context.Context, run *runner, l locker) Result {
	res := Result{Lock: l.name, Scenario: "wake"}
	if l.wait == nil {
		res.Skipped = true
		res.Note = "no waiting acquire in this lock"
		return res
	}
	sz := run.sizes
	key := run.key(l, "wake", 0)
	var samples []time.Duration
	var errs errorLog
	for s := range sz.wakeSamples {
		if s%10 == 0 {
			run.progress("wake", l.name, s, sz.wakeSamples)
		}
		d, err := wakeOnce(ctx, l, key, sz.wakeBlock)
		if err != nil {
			errs.add(err)
			continue
		}
		samples = append(samples, d)
	}
	res.setLatency(samples)
	errs.fill(&res)
	res.Note = fmt.Sprintf("waiter blocked %v-%v before the release", sz.wakeBlock[0], sz.wakeBlock[1])
	return res
}

func wakeOnce(ctx context.Context, l locker, key string, block [2]time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rel, err := l.try(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("holder: %w", err)
	}
	type got struct {
		at  time.Time
		err error
	}
	done := make(chan got, 1)
	go func() {
		wrel, err := l.wait(ctx, key)
		at := time.Now()
		if err == nil {
			err = wrel(ctx)
		}
		done <- got{at, err}
	}()
	time.Sleep(block[0] + rand.N(block[1]-block[0]+1))
	if err := rel(ctx); err != nil {
		<-done
		return 0, fmt.Errorf("holder release: %w", err)
	}
	released := time.Now()
	g := <-done
	if g.err != nil {
		return 0, fmt.Errorf("waiter: %w", g.err)
	}
	// The waiter can return a hair before the holder's Release does (its
	// wake-up and the release reply leave the server together); count that
	// as zero.
	return max(0, g.at.Sub(released)), nil
}

// hotkeyRuns are the hotkey scenarios: the same run with 8 and with 64
// workers, each a row of its own.
var hotkeyRuns = []struct {
	scenario string
	workers  int
}{{"hotkey", 8}, {"hotkey64", 64}}

// hotkey runs workers on one key, each holding the lock for hold per
// critical section, using the library's waiting acquire; it reports
// critical sections per second and each worker's share.
func hotkey(ctx context.Context, run *runner, l locker, scenario string, workers int) Result {
	res := Result{Lock: l.name, Scenario: scenario, Workers: workers}
	if l.wait == nil {
		res.Skipped = true
		res.Note = "no waiting acquire in this lock"
		return res
	}
	sz := run.sizes
	run.progress(scenario, l.name, 0, 1)
	key := run.key(l, scenario, 0)
	counts := make([]int, workers)
	var errs errorLog
	deadline := time.Now().Add(sz.hotDuration)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// over is whether the run's end caused an error: a dial can time out on
	// the deadline a moment before wctx says it is done.
	over := func() bool { return wctx.Err() != nil || time.Until(deadline) < time.Millisecond }
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for wctx.Err() == nil {
				rel, err := l.wait(wctx, key)
				if err != nil {
					if !over() {
						errs.add(err)
					}
					continue
				}
				time.Sleep(sz.hotHold)
				if !over() {
					counts[w]++
				}
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
				if err := rel(rctx); err != nil {
					errs.add(err)
				}
				rcancel()
			}
		})
	}
	wg.Wait()
	elapsed := min(time.Since(t0), sz.hotDuration)
	total := 0
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		total += c
		lo, hi = min(lo, c), max(hi, c)
	}
	res.Samples = total
	errs.fill(&res)
	res.OpsPerSec = ptr(float64(total) / elapsed.Seconds())
	if total > 0 {
		res.MinShare = ptr(float64(lo) / float64(total))
		res.MaxShare = ptr(float64(hi) / float64(total))
	}
	res.Note = fmt.Sprintf("%d workers, one key, %v held; fair share %.3f", workers, sz.hotHold, 1/float64(workers))
	return res
}

// waitCap bounds the waiters scenario, per lock.
const waitCap = 30 * time.Second

// waiters measures what many blocked waiters cost: sz.waiters goroutines
// wait, in the lock's own waiting acquire, on sz.waiterKeys keys held by
// other holders. While they wait it reads CLIENT LIST (the connections of
// the lock's client and how many are in pub/sub) and the process's CPU
// time; then the holders release and every waiter must get its lock, one
// holder per key at a time. The lock is built afresh on clients of its
// own, named so that CLIENT LIST can tell their connections apart, and
// closed afterwards, so each lock runs alone.
func waiters(ctx context.Context, run *runner, e *env, shared locker) (res Result) {
	res = Result{Lock: shared.name, Scenario: "waiters"}
	if shared.wait == nil {
		res.Skipped = true
		res.Note = "no waiting acquire in this lock"
		return res
	}
	sz := run.sizes
	var errs errorLog
	defer errs.fill(&res) // res is the named result: the fill reaches the caller
	name := fmt.Sprintf("bench-%s-waiters-%s", run.id, shared.name)
	c, closeClients := e.fresh(name)
	defer closeClients()
	l, err := newLocker(shared.name, c)
	if err != nil {
		errs.add(err)
		return res
	}
	defer l.free() // before closeClients
	servers := []redis.UniversalClient{e.single}
	if l.nodes > 1 {
		servers = e.many[:l.nodes]
	}
	run.progress("waiters", l.name, 0, sz.waiters)

	cctx, cancel := context.WithTimeout(ctx, waitCap)
	defer cancel()
	relCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	}
	keys := make([]string, sz.waiterKeys)
	held := make([]release, len(keys))
	inUse := make([]atomic.Int32, len(keys)) // holders of each key right now, by the bench's count
	for k := range keys {
		keys[k] = run.key(l, "waiters", k)
		rel, err := l.try(cctx, keys[k])
		if err != nil {
			errs.add(fmt.Errorf("holder of key %d: %w", k, err))
			continue
		}
		held[k] = rel
		inUse[k].Store(1)
	}

	var got atomic.Int64
	var last atomic.Int64 // Unix ns of the latest acquire
	var wg sync.WaitGroup
	for i := range sz.waiters {
		k := i % len(keys)
		wg.Go(func() {
			rel, err := l.wait(cctx, keys[k])
			if err != nil {
				errs.add(fmt.Errorf("waiter: %w", err))
				return
			}
			at := time.Now().UnixNano()
			if n := inUse[k].Add(1); n != 1 {
				errs.add(fmt.Errorf("key %d: %d holders at once", k, n))
			}
			for {
				if prev := last.Load(); at <= prev || last.CompareAndSwap(prev, at) {
					break
				}
			}
			if n := got.Add(1); n%100 == 0 {
				run.progress("waiters", l.name, int(n), sz.waiters)
			}
			inUse[k].Add(-1)
			rctx, rcancel := relCtx()
			defer rcancel()
			if err := rel(rctx); err != nil {
				errs.add(fmt.Errorf("waiter release: %w", err))
			}
		})
	}

	sleep := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-cctx.Done():
		}
	}
	var conns connCount
	count := func() {
		n, err := countConns(cctx, servers, name)
		if err != nil {
			errs.add(fmt.Errorf("CLIENT LIST: %w", err))
			return
		}
		conns = conns.max(n)
	}
	sleep(sz.waitSettle)
	count()
	cpu0, wall0 := cpuTime(), time.Now()
	sleep(sz.waitWindow)
	cpu1, wall1 := cpuTime(), time.Now()
	count()
	early := got.Load() // waiters that got a lock before any release: an error, counted above

	released := time.Now()
	var hw sync.WaitGroup
	for k, rel := range held {
		if rel == nil {
			continue
		}
		hw.Go(func() {
			inUse[k].Add(-1)
			rctx, rcancel := relCtx()
			defer rcancel()
			if err := rel(rctx); err != nil {
				errs.add(fmt.Errorf("holder release: %w", err))
			}
		})
	}
	hw.Wait()
	wg.Wait()

	n := int(got.Load())
	res.Samples, res.Workers, res.Keys = n, sz.waiters, len(keys)
	res.Conns, res.PubSubConns, res.ServerConns = iptr(conns.conns), iptr(conns.pubsub), iptr(conns.server)
	if d := wall1.Sub(wall0); d > 0 {
		res.CPUPerSec = ptr((cpu1 - cpu0).Seconds() / d.Seconds())
	}
	if n == sz.waiters && early == 0 {
		res.AllAcquiredMs = ptr(float64(time.Unix(0, last.Load()).Sub(released).Microseconds()) / 1e3)
	}
	res.Note = fmt.Sprintf("%d waiters on %d keys (%d each), waiting %v before a %v CPU window, then released; "+
		"%d of %d got the lock; connections of this lock's own client(s), summed over its %d server(s)",
		sz.waiters, len(keys), sz.waiters/len(keys), sz.waitSettle, sz.waitWindow, n, sz.waiters, len(servers))
	return res
}

// connCount is what CLIENT LIST says of a lock's connections.
type connCount struct {
	conns  int // of the lock's client (by name)
	pubsub int // of those, in pub/sub
	server int // all connections on the servers
}

func (c connCount) max(o connCount) connCount {
	return connCount{max(c.conns, o.conns), max(c.pubsub, o.pubsub), max(c.server, o.server)}
}

// countConns reads CLIENT LIST on every server and counts the connections
// named name, and of those the ones in pub/sub: subscribed to a channel, a
// pattern or a shard channel (sub=, psub=, ssub= above 0), or flagged P.
func countConns(ctx context.Context, servers []redis.UniversalClient, name string) (connCount, error) {
	var c connCount
	for _, s := range servers {
		list, err := s.ClientList(ctx).Result()
		if err != nil {
			return c, err
		}
		for line := range strings.SplitSeq(list, "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			c.server++
			f := map[string]string{}
			for kv := range strings.FieldsSeq(line) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					f[k] = v
				}
			}
			if f["name"] != name {
				continue
			}
			c.conns++
			subs := 0
			for _, k := range []string{"sub", "psub", "ssub"} {
				n, _ := strconv.Atoi(f[k])
				subs += n
			}
			if subs > 0 || strings.Contains(f["flags"], "P") {
				c.pubsub++
			}
		}
	}
	return c, nil
}

// cpuTime is the CPU time (user + system) the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
