package checkrun

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// The election workload, Jepsen's etcd lock-set for leaders: leader
// processes (election_leader.go) append to one set through pgverifier while
// they lead, and a nemesis of its own pauses the current leader past its
// term (SIGSTOP, then SIGCONT) or kills it (SIGKILL, and a new process takes
// its place). The fenced-mutex and lost-update checkers read the history:
// no append of a deposed leader may land after a newer term's.

// kindElection is the election workload's row in `bench check`.
const kindElection = "election+verifier"

var electionInfo = report.LockInfo{Name: kindElection, Family: locks.Fencelock, Fenced: true, Nodes: 1,
	Note: "fencelock election: leader processes append to a set through pgverifier (guard, read, write in one transaction) while they lead, 3-10 appends per term, then resign; the leader is paused (SIGSTOP) past its term or killed (SIGKILL)"}

// Faults of the election workload (its own nemesis; -faults does not apply).
const (
	faultPauseLeader check.Fault = "pause-leader"
	faultKillLeader  check.Fault = "kill-leader"
)

// maxLeaders is how many leader processes run at once (each is a process;
// the machine may have two cores).
const maxLeaders = 4

// ElectionStats is what the election workload's processes went through.
type ElectionStats struct {
	Processes int `json:"processes"` // started, replacements included
	Terms     int `json:"terms"`     // terms won
	Pauses    int `json:"pauses"`    // leaders paused past their term
	Deposed   int `json:"deposed"`   // pauses during which a new term began
	Kills     int `json:"kills"`     // leaders killed
	// Failover is the longest time from a kill to the next term won; the
	// bound is the ttl plus a campaigner's wake-up.
	Failover string `json:"failover"`
}

// leaders is the running leader processes and what they said.
type leaders struct {
	spec  leaderSpec
	rec   *check.Recorder
	mu    sync.Mutex
	procs map[int]*waiterProc // by client number
	who   map[string]int      // term holder id -> client
	won   []time.Time
	terms int
	wg    sync.WaitGroup
}

func (ls *leaders) start(client int) error {
	s := ls.spec
	s.Client = client
	p, err := startChild(LeaderEnv, s, 1024)
	if err != nil {
		return err
	}
	ls.mu.Lock()
	ls.procs[client] = p
	ls.mu.Unlock()
	ls.wg.Add(1)
	go func() { defer ls.wg.Done(); ls.read(p) }()
	return nil
}

// read records p's lines until it exits.
func (ls *leaders) read(p *waiterProc) {
	for l := range p.lines {
		var ln leaderLine
		if json.Unmarshal([]byte(l), &ln) != nil {
			continue
		}
		tok := check.Token{Key: ls.spec.Name, Seq: ln.Seq, Holder: ln.Holder}
		if ln.Ev == "won" {
			ls.mu.Lock()
			ls.who[ln.Holder] = ln.Client
			ls.won = append(ls.won, time.Now())
			ls.terms++
			ls.mu.Unlock()
			continue
		}
		h := ls.rec.Invoke(check.Op{Client: ln.Client, Holder: ln.Holder, Kind: check.KindAppend,
			Resource: ls.spec.Set, Value: ln.Elem, Token: tok})
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
}

// leader returns the process of the current leader, if one of ours leads.
func (ls *leaders) leader(ctx context.Context, e *election.Election) (int, *waiterProc, uint64, bool) {
	tok, err := e.Leader(ctx)
	if err != nil {
		return 0, nil, 0, false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	c, ok := ls.who[tok.Holder]
	if !ok || ls.procs[c] == nil {
		return 0, nil, 0, false
	}
	return c, ls.procs[c], tok.Seq, true
}

// firstWonAfter returns the first term won after t.
func (ls *leaders) firstWonAfter(t time.Time) (time.Time, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, w := range ls.won {
		if w.After(t) {
			return w, true
		}
	}
	return time.Time{}, false
}

// stop closes every leader's stdin (it resigns and exits), and kills those
// that did not exit in time.
func (ls *leaders) stop() {
	ls.mu.Lock()
	ps := make([]*waiterProc, 0, len(ls.procs))
	for _, p := range ls.procs {
		ps = append(ps, p)
	}
	ls.mu.Unlock()
	for _, p := range ps {
		p.signal(syscall.SIGCONT)
		p.stdin.Close()
	}
	for _, p := range ps {
		if !p.wait(20 * time.Second) {
			p.kill()
		}
	}
	ls.wg.Wait()
}

// runElection runs the election workload for the run's duration, then the
// checkers.
func (e *env) runElection(ctx context.Context, info report.LockInfo) Kind {
	o := e.o
	k := Kind{Lock: info}
	fail := func(err error) Kind {
		k.Error = err.Error()
		k.Summary = check.Summarize(info.Name, info.Fenced, o.seed, check.History{}, nil)
		return k
	}
	e.progress.Step(info.Name, "starting servers")
	var addr string
	if len(e.given) > 0 {
		addr = e.given[0].Addr
	} else {
		r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
		if err != nil {
			return fail(fmt.Errorf("starting redis: %w", err))
		}
		defer r.Close()
		addr = r.Addr()
	}
	name := fmt.Sprintf("check-%s-election", e.runID)
	set := resource{name: name + "-set", set: true}
	if err := newResources(ctx, e.db, []resource{set}); err != nil {
		return fail(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	lc, err := lease.New(rdb)
	if err != nil {
		return fail(err)
	}
	el, err := election.New(lc, name, o.ttl) // to read who leads, never to campaign
	if err != nil {
		return fail(err)
	}

	t0 := time.Now()
	rec := check.NewRecorderClock(t0, func() time.Duration { return time.Since(t0) })
	ls := &leaders{spec: leaderSpec{Redis: addr, DSN: e.dsn, Name: name, Set: set.name, TTL: o.ttl},
		rec: rec, procs: map[int]*waiterProc{}, who: map[string]int{}}
	n := min(o.clients, maxLeaders)
	for i := range n {
		if err := ls.start(i); err != nil {
			ls.stop()
			return fail(err)
		}
	}
	stopCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	st := ElectionStats{Processes: n}
	applied := e.electionNemesis(stopCtx, el, ls, &st)
	e.progress.Step(info.Name, "stopping leaders")
	ls.stop()
	st.Terms = ls.terms
	h := rec.History()

	e.progress.Step(info.Name, "checking")
	final, err := readFinal(ctx, e.db, []resource{set})
	if err != nil {
		return fail(err)
	}
	results := []check.Result{check.CheckFencedMutex(h), check.CheckLostUpdates(h, final, nil)}
	k.Election = &st
	k.Run = check.Run{
		Summary:  check.Summarize(info.Name, info.Fenced, o.seed, h, applied, results...),
		Schedule: applied, Results: results, Final: final, History: h,
	}
	return k
}

// electionNemesis pauses or kills the current leader, one fault at a time
// with gaps of 0.5-1.5 ttl, until ctx ends: two pauses (1.5-3 ttl: past
// the term), then a kill (a new process replaces it), and again.
func (e *env) electionNemesis(ctx context.Context, el *election.Election, ls *leaders, st *ElectionStats) []check.Window {
	ttl := e.o.ttl
	rng := rand.New(rand.NewPCG(uint64(e.o.seed), 0xe1ec))
	next := len(ls.procs)
	var applied []check.Window
	var failover time.Duration
	for {
		sleep(ctx, ttl/2+rand.N(ttl))
		if ctx.Err() != nil {
			break
		}
		e.progress.Step(kindElection, fmt.Sprintf("%d faults", len(applied)))
		c, p, seq, ok := ls.leader(ctx, el)
		if !ok {
			continue
		}
		start := time.Now()
		w := check.Window{Start: ls.rec.Offset(start), Target: uint32(c)}
		if len(applied)%3 != 2 { // pause, pause, kill, ...
			d := ttl*3/2 + time.Duration(rng.Int64N(int64(ttl*3/2)))
			p.signal(syscall.SIGSTOP)
			sleep(context.WithoutCancel(ctx), d)
			_, _, now, led := ls.leader(ctx, el)
			p.signal(syscall.SIGCONT)
			st.Pauses++
			deposed := led && now > seq
			if deposed {
				st.Deposed++
			}
			w.Fault, w.Duration = faultPauseLeader, time.Since(start)
			w.Detail = fmt.Sprintf("leader %d (term %d) stopped %v; new term meanwhile: %v", c, seq, d.Round(time.Millisecond), deposed)
		} else {
			p.signal(syscall.SIGKILL)
			st.Kills++
			if err := ls.start(next); err == nil {
				st.Processes++
				next++
			}
			won, ok := waitWon(ctx, ls, start, 3*ttl+5*time.Second)
			gap := won.Sub(start)
			if ok {
				failover = max(failover, gap)
			}
			w.Fault, w.Duration = faultKillLeader, time.Since(start)
			w.Detail = fmt.Sprintf("leader %d (term %d) killed; next term after %v", c, seq, gap.Round(time.Millisecond))
		}
		applied = append(applied, w)
	}
	st.Failover = failover.Round(time.Millisecond).String()
	return applied
}

// waitWon waits at most limit for a term won after t.
func waitWon(ctx context.Context, ls *leaders, t time.Time, limit time.Duration) (time.Time, bool) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) && ctx.Err() == nil {
		if w, ok := ls.firstWonAfter(t); ok {
			return w, true
		}
		sleep(ctx, 5*time.Millisecond)
	}
	return time.Time{}, false
}
