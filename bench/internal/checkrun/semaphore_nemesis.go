package checkrun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// semNemesis applies the semaphore workload's faults, one at a time with
// gaps of 0.5-1.5 ttl, in the order of semFaults, until ctx ends: a holder
// stopped for 1.5-3 ttl (past its ttl: its permit passes on), a holder
// killed (a new process takes its place), a holder's bytes to PostgreSQL
// delayed for 1.5-3 ttl, Redis killed and restarted empty, a waiting
// writer stopped for 1.5-3 ttl. A fault with no one to hit (no holder, no
// waiter at that moment) is tried again after the next gap; one the setup
// cannot take (Redis given, PostgreSQL on a socket) is skipped, and so is
// one -faults leaves out.
func (e *env) semNemesis(ctx context.Context, kind string, ws *semWriters, srv *testenv.Redis) (applied, skipped []check.Window) {
	ttl := e.o.ttl
	rng := rand.New(rand.NewPCG(uint64(e.o.seed), 0x5e4a))
	st := ws.st
	var freed time.Duration
	round := slices.DeleteFunc(slices.Clone(semFaults), func(f check.Fault) bool {
		if f == faultKillHolder {
			return !e.o.killHolder
		}
		return !slices.Contains(e.o.faults, f)
	})
	if srv == nil && slices.Contains(round, check.FaultRestartRedis) {
		round = slices.DeleteFunc(round, func(f check.Fault) bool { return f == check.FaultRestartRedis })
		skipped = append(skipped, check.Window{Fault: check.FaultRestartRedis, Detail: "skipped: the Redis server was given (-redis-url): a restart would destroy its data"})
	}
	if ws.pgTCP == "" && slices.Contains(round, check.FaultDelayWrite) {
		round = slices.DeleteFunc(round, func(f check.Fault) bool { return f == check.FaultDelayWrite })
		skipped = append(skipped, check.Window{Fault: check.FaultDelayWrite, Detail: "skipped: PostgreSQL is reached over a Unix socket: no proxy to delay"})
	}
	holding := func(sp *semProc) bool { return sp.holding }
	for i := 0; ; {
		sleep(ctx, ttl/2+rand.N(ttl))
		if len(round) == 0 {
			<-ctx.Done() // no faults: the writers run on
		}
		if ctx.Err() != nil {
			break
		}
		e.progress.Step(kind, fmt.Sprintf("%d faults", len(applied)))
		f := round[i%len(round)]
		long := ttl*3/2 + time.Duration(rng.Int64N(int64(ttl*3/2)))
		start := time.Now()
		w := check.Window{Start: ws.rec.Offset(start), Fault: f}
		var sp *semProc
		switch f {
		case check.FaultPauseHolder, check.FaultDelayWrite:
			if sp = ws.pick(rng, holding); sp == nil {
				continue
			}
			slot := sp.slot
			if f == check.FaultPauseHolder {
				sp.p.signal(syscall.SIGSTOP)
				sleep(context.WithoutCancel(ctx), long)
				sp.p.signal(syscall.SIGCONT)
				st.Pauses++
				_, passed := ws.grantedAfter(slot, sp.client, start)
				if passed {
					st.Passed++
				}
				w.Detail = fmt.Sprintf("writer %d holding slot %d stopped %v; slot granted to another meanwhile: %v",
					sp.client, slot, long.Round(time.Millisecond), passed)
			} else {
				sp.proxy.Delay(long)
				sleep(context.WithoutCancel(ctx), long)
				sp.proxy.Delay(0)
				st.Delays++
				w.Detail = fmt.Sprintf("writer %d holding slot %d: every byte to PostgreSQL delayed by %v",
					sp.client, slot, long.Round(time.Millisecond))
			}
		case faultKillHolder:
			if sp = ws.pick(rng, holding); sp == nil {
				continue
			}
			slot := sp.slot
			ws.mu.Lock()
			sp.gone = true
			ws.mu.Unlock()
			sp.p.signal(syscall.SIGKILL)
			st.Kills++
			if err := ws.start(); err != nil {
				w.Detail = "no replacement: " + err.Error()
			}
			var gap time.Duration
			next, ok := time.Time{}, false
			for end := start.Add(3*ttl + 5*time.Second); time.Now().Before(end) && ctx.Err() == nil; sleep(ctx, 5*time.Millisecond) {
				if next, ok = ws.grantedAfter(slot, sp.client, start); ok {
					break
				}
			}
			if ok {
				gap = next.Sub(start)
				freed = max(freed, gap)
			}
			w.Detail = strings.TrimPrefix(w.Detail+"; ", "; ") + fmt.Sprintf("writer %d holding slot %d killed; slot granted again after %v",
				sp.client, slot, gap.Round(time.Millisecond))
		case check.FaultRestartRedis:
			if err := faults.Restart(ctx, srv); err != nil {
				w.Detail = "failed: " + err.Error()
				skipped = append(skipped, w)
				i++
				continue
			}
			st.Restarts++
			w.Detail = "the node: killed and restarted empty"
		case check.FaultPauseWaiter:
			if sp = ws.pick(rng, func(sp *semProc) bool { return sp.waiting }); sp == nil {
				continue
			}
			sp.p.signal(syscall.SIGSTOP)
			sleep(context.WithoutCancel(ctx), long)
			sp.p.signal(syscall.SIGCONT)
			st.WaiterPauses++
			w.Detail = fmt.Sprintf("writer %d waiting for a permit stopped %v", sp.client, long.Round(time.Millisecond))
		}
		if sp != nil {
			w.Target = uint32(sp.client)
		}
		w.Duration = max(time.Since(start), time.Millisecond)
		applied = append(applied, w)
		i++
	}
	st.Freed = freed.Round(time.Millisecond).String()
	return applied, skipped
}
