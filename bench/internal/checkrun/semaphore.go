package checkrun

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
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

// semProc is one writer process and what its lines said.
type semProc struct {
	p      *waiterProc
	proxy  *faults.Proxy // nil when PostgreSQL is not on TCP
	client int
	// Under semWriters.mu:
	gone, waiting, holding bool
	slot                   int
	lease                  *check.Lease // the permit held, recorded once released
	pending                map[int]*check.Handle
}

// semGot is one permit granted, for the nemesis.
type semGot struct {
	client, slot int
	at           time.Time
}

// semWriters is the running writer processes.
type semWriters struct {
	spec  semWriterSpec // without Client and PgAddr
	pgTCP string
	rec   *check.Recorder
	mu    sync.Mutex
	procs map[int]*semProc // by client number
	gots  []semGot
	next  int // the next client number
	st    *SemaphoreStats
	noGot int64
	last  string // the last failed acquisition's error
	wg    sync.WaitGroup
}

// start starts a writer process with the next client number.
func (ws *semWriters) start() error {
	ws.mu.Lock()
	c := ws.next
	ws.next++
	ws.mu.Unlock()
	s := ws.spec
	s.Client = c
	sp := &semProc{client: c, pending: map[int]*check.Handle{}}
	if ws.pgTCP != "" {
		px, err := faults.StartProxy(ws.pgTCP)
		if err != nil {
			return err
		}
		sp.proxy, s.PgAddr = px, px.Addr()
	}
	p, err := startChild(SemWriterEnv, s, 1024)
	if err != nil {
		if sp.proxy != nil {
			sp.proxy.Close()
		}
		return err
	}
	sp.p = p
	ws.mu.Lock()
	ws.procs[c] = sp
	ws.st.Processes++
	ws.mu.Unlock()
	ws.wg.Add(1)
	go func() { defer ws.wg.Done(); ws.read(sp) }()
	return nil
}

// read records sp's lines until it exits.
func (ws *semWriters) read(sp *semProc) {
	off := func(unixNs int64) time.Duration { return wallOffset(ws.rec, unixNs) }
	for l := range sp.p.lines {
		var ln semLine
		if json.Unmarshal([]byte(l), &ln) != nil {
			continue
		}
		ws.mu.Lock()
		switch ln.Ev {
		case "wait":
			sp.waiting = true
		case "nogot":
			sp.waiting = false
			ws.noGot++
			ws.last = ln.Err
		case "got":
			sp.waiting, sp.holding, sp.slot = false, true, ln.Slot
			sp.lease = &check.Lease{Client: sp.client, Lock: ln.Token.Key, Holder: ln.ID, Token: ln.Token,
				Start: off(ln.At), Deadline: max(off(ln.Deadline), 1), Held: ln.Held}
			ws.gots = append(ws.gots, semGot{sp.client, ln.Slot, time.Now()})
			ws.st.Acquired++
		case "invoke":
			sp.pending[ln.Op] = ws.rec.Invoke(check.Op{Client: sp.client, Holder: ln.ID, Kind: check.KindAppend,
				Resource: ws.spec.Sets[ln.Slot], Value: ln.Elem, Token: ln.Token})
		case "done":
			if h := sp.pending[ln.Op]; h != nil {
				delete(sp.pending, ln.Op)
				h.SetToken(ln.Token)
				err := fmt.Errorf("%s", ln.Err)
				switch ln.Outcome {
				case "ok":
					h.Ok(uint64(ln.Commit))
				case "rejected":
					h.Reject(err)
				case "fail":
					h.Fail(err)
				default:
					h.Unknown(err)
				}
			}
		case "released":
			sp.holding = false
			if sp.lease != nil {
				sp.lease.Released = max(off(ln.At), sp.lease.Start)
				ws.rec.AddLease(*sp.lease)
				sp.lease = nil
			}
		}
		ws.mu.Unlock()
	}
	// It exited (or was killed): the permit it held is recorded without a
	// release; a write it had begun stays pending (unknown).
	ws.mu.Lock()
	defer ws.mu.Unlock()
	sp.gone, sp.waiting, sp.holding = true, false, false
	if sp.lease != nil {
		ws.rec.AddLease(*sp.lease)
		sp.lease = nil
	}
}

// pick returns one of the live processes for which f holds (under mu),
// chosen by rng, or nil.
func (ws *semWriters) pick(rng *rand.Rand, f func(sp *semProc) bool) *semProc {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var cs []int
	for c, sp := range ws.procs {
		if !sp.gone && f(sp) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	slices.Sort(cs)
	return ws.procs[cs[rng.IntN(len(cs))]]
}

// grantedAfter returns the first grant of slot after t to a client other
// than not.
func (ws *semWriters) grantedAfter(slot, not int, t time.Time) (time.Time, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, g := range ws.gots {
		if g.slot == slot && g.client != not && g.at.After(t) {
			return g.at, true
		}
	}
	return time.Time{}, false
}

// stop closes every writer's stdin (it finishes its permit and exits),
// and kills those that did not exit in time.
func (ws *semWriters) stop() {
	ws.mu.Lock()
	ps := make([]*semProc, 0, len(ws.procs))
	for _, sp := range ws.procs {
		ps = append(ps, sp)
	}
	ws.mu.Unlock()
	for _, sp := range ps {
		sp.p.signal(syscall.SIGCONT)
		sp.p.stdin.Close()
	}
	for _, sp := range ps {
		if !sp.p.wait(20 * time.Second) {
			sp.p.kill()
		}
	}
	ws.wg.Wait()
	for _, sp := range ps {
		if sp.proxy != nil {
			sp.proxy.Close()
		}
	}
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
