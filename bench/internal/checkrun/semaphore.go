package checkrun

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/internal/testenv"
)

// The semaphore workload: writer processes (semaphore_writer.go) share a
// fencelock semaphore of semPermits permits; a writer that holds slot i
// appends to slot i's set, since a permit's token is its slot's (a
// verifier keeps one high-water per slot). A nemesis of its own, as the
// election's, stops a holder past its ttl (SIGSTOP, then SIGCONT), kills
// one (SIGKILL; a new process takes its place), delays a holder's bytes to
// PostgreSQL (its proxy), restarts Redis empty and stops a waiting writer.
// The checkers read the history per slot as a lock's (fenced-mutex,
// exclusion), the sets (lost-update), and across the slots the
// semaphore's own bound (permits: no more than N holders' writes at once).
// This file has the kinds and the run; semaphore_procs.go the parent's
// handle on the writers, semaphore_nemesis.go the faults.

// The semaphore workload's rows in `bench check`.
const (
	kindSemaphore         = "semaphore"
	kindSemaphoreVerifier = "semaphore+verifier"
)

// semPermits is N: the semaphore's permits.
const semPermits = 3

// maxSemWriters is how many writer processes run at once: N holders and
// a queue behind them.
const maxSemWriters = 2 * semPermits

var semaphoreInfos = []report.LockInfo{
	{Name: kindSemaphore, Family: locks.Fencelock, Nodes: 1,
		Note: fmt.Sprintf("fencelock semaphore, %d permits: writer processes append to their slot's set, checking Held() before each write; token not used", semPermits)},
	{Name: kindSemaphoreVerifier, Family: locks.Fencelock, Fenced: true, Nodes: 1,
		Note: fmt.Sprintf("fencelock semaphore, %d permits: writer processes append to their slot's set through pgverifier.WithTx with the permit's token (its slot's counter), heal.Write on a stale token", semPermits)},
}

// isSemaphore reports whether kind is one of the semaphore workload's.
func isSemaphore(kind string) bool { return kind == kindSemaphore || kind == kindSemaphoreVerifier }

// The kill-holder fault of the semaphore workload (its other faults are
// the schedule's, applied its own way).
const faultKillHolder check.Fault = "kill-holder"

// semFaults is the nemesis's round, in order.
var semFaults = []check.Fault{check.FaultPauseHolder, faultKillHolder, check.FaultDelayWrite,
	check.FaultRestartRedis, check.FaultPauseWaiter}

// SemaphoreStats is what the semaphore workload's processes went through.
type SemaphoreStats struct {
	Permits   int `json:"permits"`
	Processes int `json:"processes"` // started, replacements included
	Acquired  int `json:"acquired"`  // permits granted
	// Pauses is holders stopped past their ttl; Passed, of those, the ones
	// whose slot another writer got meanwhile.
	Pauses int `json:"pauses"`
	Passed int `json:"passed"`
	// Delays is holders whose bytes to PostgreSQL were delayed past their ttl.
	Delays int `json:"delays"`
	// WaiterPauses is writers stopped while waiting for a permit.
	WaiterPauses int `json:"waiter_pauses"`
	Kills        int `json:"kills"`
	Restarts     int `json:"restarts"`
	// Freed is the longest time from a kill to the next grant of the
	// killed holder's slot; the bound is the ttl plus a waiter's wake-up.
	Freed string `json:"freed"`
}

// runSemaphore runs the semaphore workload (fenced or not, as info says)
// for the run's duration, then the checkers.
func (e *env) runSemaphore(ctx context.Context, info report.LockInfo) Kind {
	o := e.o
	k := Kind{Lock: info}
	fail := func(err error) Kind {
		k.Error = err.Error()
		k.Summary = check.Summarize(info.Name, info.Fenced, o.seed, check.History{}, nil)
		return k
	}
	e.progress.Step(info.Name, "starting servers")
	var addr string
	var srv *testenv.Redis // nil when given: no restart
	if len(e.given) > 0 {
		addr = e.given[0].Addr
	} else {
		r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
		if err != nil {
			return fail(fmt.Errorf("starting redis: %w", err))
		}
		defer r.Close()
		srv, addr = r, r.Addr()
	}
	name := fmt.Sprintf("check-%s-%s", e.runID, info.Name)
	var res []resource
	var sets []string
	for i := range semPermits {
		r := resource{name: fmt.Sprintf("%s-slot%d-set", name, i), set: true}
		res, sets = append(res, r), append(sets, r.name)
	}
	if err := newResources(ctx, e.db, res); err != nil {
		return fail(err)
	}

	t0 := time.Now()
	rec := check.NewRecorderClock(t0, func() time.Duration { return time.Since(t0) })
	st := SemaphoreStats{Permits: semPermits}
	ws := &semWriters{spec: semWriterSpec{Redis: addr, DSN: e.dsn, Name: name, Permits: semPermits, Sets: sets,
		TTL: o.ttl, Fenced: info.Fenced}, pgTCP: e.pgTCP, rec: rec, procs: map[int]*semProc{}, st: &st}
	for range min(o.clients, maxSemWriters) {
		if err := ws.start(); err != nil {
			ws.stop()
			return fail(err)
		}
	}
	stopCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	applied, skipped := e.semNemesis(stopCtx, info.Name, ws, srv)
	e.progress.Step(info.Name, "stopping writers")
	ws.stop()
	h := rec.History()

	e.progress.Step(info.Name, "checking")
	final, err := readFinal(ctx, e.db, res)
	if err != nil {
		return fail(err)
	}
	results := []check.Result{
		check.CheckFencedMutex(h),
		check.CheckLostUpdates(h, final, nil),
		check.CheckPermits(h, semPermits),
		check.CheckExclusion(h, applied),
	}
	k.Semaphore = &st
	k.AcquireFailures, k.LastAcquireError = ws.noGot, ws.last
	k.Run = check.Run{
		Summary:  check.Summarize(info.Name, info.Fenced, o.seed, h, applied, results...),
		Schedule: applied, Results: results, Final: final, History: h,
	}
	k.Skipped = skipped
	return k
}
