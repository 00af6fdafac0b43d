package checkrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/safety"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// nemesis applies a schedule's fault windows to one kind's run.
type nemesis struct {
	t0      time.Time // the run's (and the recorder's) start
	clients []*client
	// sites is the Redis sites a node fault hits: the one node of a
	// single-node kind, three of five for a quorum kind (a majority, so
	// that the lock is lost to a new holder). Each is a primary with a
	// replica behind a proxy, so that it can be failed over.
	sites []safety.Site
	// skip says why a fault is not applied to this kind.
	skip map[check.Fault]string
	// rec is the run's recorder: the process faults add the leases and
	// leaves of their waiter processes to it, and read the clients' leases.
	rec *check.Recorder
	// w is what the process faults (pause-waiter, leave-queue) need: nil
	// when the kind has no fair queue (they are skipped).
	w *waiters
	// bg is the process faults' watchers still running.
	bg sync.WaitGroup
}

// run walks the schedule: it waits for each window, applies its fault,
// and, for faults with an end, undoes it when the window closes. It returns
// the windows applied and those skipped (or that failed to apply), with
// their Detail filled in. The waiter processes of a process fault are
// started one window ahead, so that their start-up is not in their window.
func (n *nemesis) run(ctx context.Context, sched []check.Window) (applied, skipped []check.Window) {
	procs := map[int][]*waiterProc{}
	prepErr := map[int]error{}
	prepare := func(i int) {
		if i >= len(sched) || n.w == nil || !isProcessFault(sched[i].Fault) {
			return
		}
		if _, skip := n.skip[sched[i].Fault]; skip {
			return
		}
		procs[i], prepErr[i] = startWaiters(n.w.specs(sched[i]))
	}
	defer func() {
		for _, ps := range procs {
			killAll(ps) // started for windows the run did not reach
		}
		n.bg.Wait()
	}()
	prepare(0)
	for i, w := range sched {
		prepare(i + 1)
		if !n.until(ctx, w.Start) {
			break
		}
		if why, ok := n.skip[w.Fault]; ok {
			w.Detail = "skipped: " + why
			skipped = append(skipped, w)
			continue
		}
		// A window that starts late (the one before overran: a frozen
		// waiter is thawed only once the lock passed on) is recorded as
		// applied, not as drawn, and so is one that ends late: the
		// checkers excuse what a fault explains by when it ran.
		if late := time.Since(n.t0) - w.Start; late > 10*time.Millisecond {
			w.Start += late
		}
		var detail string
		var err error
		if isProcessFault(w.Fault) {
			ps := procs[i]
			delete(procs, i)
			if err = prepErr[i]; err == nil {
				detail, err = n.applyProcess(w, ps)
			}
		} else {
			detail, err = n.apply(ctx, w)
		}
		w.Detail = detail
		if end := time.Since(n.t0); end > w.End() {
			w.Duration = end - w.Start
		}
		if err != nil {
			w.Detail = strings.TrimPrefix(w.Detail+"; ", "; ") + "failed: " + err.Error()
			skipped = append(skipped, w)
			continue
		}
		applied = append(applied, w)
	}
	return applied, skipped
}

// isProcessFault reports whether f acts through waiter processes.
func isProcessFault(f check.Fault) bool {
	return f == check.FaultPauseWaiter || f == check.FaultLeaveQueue
}

// applyProcess runs a process fault's window with its waiter processes
// (one per lock group), which it ends.
func (n *nemesis) applyProcess(w check.Window, ps []*waiterProc) (string, error) {
	if w.Fault == check.FaultPauseWaiter {
		return n.pauseWaiters(ps)
	}
	return n.leaveQueue(w, ps)
}

// until waits until offset from t0, and reports whether ctx is still live.
func (n *nemesis) until(ctx context.Context, offset time.Duration) bool {
	sleep(ctx, time.Until(n.t0.Add(offset)))
	return ctx.Err() == nil
}

// apply injects one window's fault and, where the fault has an end, waits
// for the window to close and undoes it.
func (n *nemesis) apply(ctx context.Context, w check.Window) (string, error) {
	switch w.Fault {
	case check.FaultPauseHolder:
		c, how := n.pick(w.Target)
		c.pause.Store(int64(w.Duration))
		return fmt.Sprintf("client %d (%s) stops for %v at its next pause point", c.id, how, w.Duration), nil
	case check.FaultDelayWrite:
		c, how := n.pick(w.Target)
		if c.proxy == nil {
			return "", errors.New("the client has no proxy")
		}
		c.proxy.Delay(w.Duration)
		n.until(ctx, w.End())
		c.proxy.Delay(0)
		return fmt.Sprintf("client %d (%s): every byte to Postgres delayed by %v", c.id, how, w.Duration), nil
	case check.FaultRestartRedis:
		return n.nodes(ctx, "killed and restarted empty", func(s safety.Site) error {
			return faults.Restart(ctx, s.Server())
		})
	case check.FaultPauseRedis:
		return n.nodes(ctx, fmt.Sprintf("SIGSTOP for %v", w.Duration), func(s safety.Site) error {
			return faults.PauseFor(ctx, s.Server(), w.Duration)
		})
	case check.FaultEarlyExpiry:
		return n.nodes(ctx, "every key with a TTL expired at once (PEXPIRE 1)", func(s safety.Site) error {
			return s.Admin(func(c *redis.Client) error { _, err := faults.ExpireAll(ctx, c); return err })
		})
	case check.FaultEvict:
		d, err := n.nodes(ctx, "maxmemory with allkeys-lru, filled until every lock key and counter was evicted",
			func(s safety.Site) error {
				return s.Admin(func(c *redis.Client) error {
					if s.Failover() != nil {
						// The replication buffer counts toward maxmemory and
						// cannot be evicted: keep it small, or Evict's filler
						// gets OOM errors instead of evicting the keys.
						if err := c.ConfigSet(ctx, "repl-backlog-size", "16384").Err(); err != nil {
							return err
						}
						sleep(ctx, 100*time.Millisecond)
					}
					_, err := faults.Evict(ctx, c)
					return err
				})
			})
		n.until(ctx, w.End())
		bg := context.WithoutCancel(ctx) // undo even when the run ends
		_, uerr := n.nodes(bg, "", func(s safety.Site) error {
			return s.Admin(func(c *redis.Client) error { return faults.Unevict(bg, c) })
		})
		return d, errors.Join(err, uerr)
	case check.FaultFailover:
		return n.failover(ctx, w)
	}
	return "", fmt.Errorf("unknown fault %q", w.Fault)
}

// failover lags the replicas, lets a third of the window's writes reach
// only the primaries, then kills the primaries and promotes the replicas;
// the old primaries rejoin as replicas when the window closes.
func (n *nemesis) failover(ctx context.Context, w check.Window) (string, error) {
	d, err := n.nodes(ctx, "replica lagged", func(s safety.Site) error { return s.Failover().LagReplica(ctx) })
	if err != nil {
		return d, err
	}
	sleep(ctx, w.Duration/3)
	d, err = n.nodes(ctx, fmt.Sprintf("replica lagged for %v, then primary killed and replica promoted", w.Duration/3),
		func(s safety.Site) error { return s.Failover().Promote(ctx) })
	n.until(ctx, w.End())
	bg := context.WithoutCancel(ctx) // undo even when the run ends
	_, rerr := n.nodes(bg, "", func(s safety.Site) error { return s.Failover().Rejoin(bg) })
	return d, errors.Join(err, rerr)
}

// nodes runs f on every site at once.
func (n *nemesis) nodes(ctx context.Context, what string, f func(s safety.Site) error) (string, error) {
	errs := make([]error, len(n.sites))
	var wg sync.WaitGroup
	for i, s := range n.sites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(s); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	which := "the node"
	if len(n.sites) > 1 {
		which = fmt.Sprintf("%d of the nodes", len(n.sites))
	}
	return which + ": " + what, errors.Join(errs...)
}

// pick chooses the client a holder fault hits: one that holds a lock and
// has not reached its pause point yet, else one that holds a lock, else any
// (the fault then lands at its next acquisition); target picks among them,
// so a seed picks alike.
func (n *nemesis) pick(target uint32) (*client, string) {
	for _, p := range []struct {
		phase int32
		how   string
	}{{beforeStep, "holding, before its write"}, {writing, "holding, writing"}} {
		var cs []*client
		for _, c := range n.clients {
			if c.phase.Load() == p.phase {
				cs = append(cs, c)
			}
		}
		if len(cs) > 0 {
			return cs[int(target)%len(cs)], p.how
		}
	}
	return n.clients[int(target)%len(n.clients)], "idle: at its next cycle"
}
