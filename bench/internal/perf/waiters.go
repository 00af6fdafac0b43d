package perf

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

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
func waiters(ctx context.Context, run *runner, e *env, shared *locks.Lock) (res report.Result) {
	if !shared.CanWait() {
		return skipped(shared.Name, "waiters")
	}
	res = report.Result{Lock: shared.Name, Scenario: "waiters"}
	sz := run.sizes
	var errs errorLog
	defer errs.fill(&res) // res is the named result: the fill reaches the caller
	name := fmt.Sprintf("bench-%s-waiters-%s", run.id, shared.Name)
	c, closeClients := e.fresh(name)
	defer closeClients()
	l, err := locks.New(shared.Name, c, locks.Config{})
	if err != nil {
		errs.add(err)
		return res
	}
	defer l.Close() // before closeClients
	servers := []redis.UniversalClient{e.single}
	if l.Nodes > 1 {
		servers = e.many[:l.Nodes]
	}
	run.step("waiters", l.Name, 0, sz.waiters)

	cctx, cancel := context.WithTimeout(ctx, waitCap)
	defer cancel()
	relCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	}
	keys := make([]string, sz.waiterKeys)
	held := make([]locks.Hold, len(keys))
	inUse := make([]atomic.Int32, len(keys)) // holders of each key right now, by the bench's count
	for k := range keys {
		keys[k] = run.key(l, "waiters", k)
		h, err := l.Try(cctx, keys[k])
		if err != nil {
			errs.add(fmt.Errorf("holder of key %d: %w", k, err))
			continue
		}
		held[k] = h
		inUse[k].Store(1)
	}

	var got atomic.Int64
	var last atomic.Int64 // Unix ns of the latest acquire
	var wg sync.WaitGroup
	for i := range sz.waiters {
		k := i % len(keys)
		wg.Go(func() {
			h, err := l.Wait(cctx, keys[k])
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
				run.step("waiters", l.Name, int(n), sz.waiters)
			}
			inUse[k].Add(-1)
			rctx, rcancel := relCtx()
			defer rcancel()
			if err := h.Release(rctx); err != nil {
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
	for k, h := range held {
		if h == nil {
			continue
		}
		hw.Go(func() {
			inUse[k].Add(-1)
			rctx, rcancel := relCtx()
			defer rcancel()
			if err := h.Release(rctx); err != nil {
				errs.add(fmt.Errorf("holder release: %w", err))
			}
		})
	}
	hw.Wait()
	wg.Wait()

	n := int(got.Load())
	res.Samples, res.Workers, res.Keys = n, sz.waiters, len(keys)
	res.Conns, res.PubSubConns, res.ServerConns = report.IntPtr(conns.conns), report.IntPtr(conns.pubsub), report.IntPtr(conns.server)
	if d := wall1.Sub(wall0); d > 0 {
		res.CPUPerSec = report.Ptr((cpu1 - cpu0).Seconds() / d.Seconds())
	}
	if n == sz.waiters && early == 0 {
		res.AllAcquiredMs = report.Ptr(float64(time.Unix(0, last.Load()).Sub(released).Microseconds()) / 1e3)
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
