package checkrun

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// The semaphore workload's writer processes, as the parent sees them:
// starting one (with its own PostgreSQL proxy), recording what its lines
// say, picking one for a fault, stopping them all.

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
