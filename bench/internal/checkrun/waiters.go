package checkrun

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
)

// The pause-waiter and leave-queue faults: a waiter process per lock group
// queues for the group's lock, among the run's clients, and is frozen
// across a handoff to it, or leaves.

// WaiterStats counts what the waiter processes of a kind went through.
type WaiterStats struct {
	// pause-waiter: waiters frozen while queued; of those, the ones the
	// lock was handed to while frozen, and the ones whose handed-off lock
	// another client took before the thaw; then the Acquire calls that
	// returned a lease after the thaw (the exclusion checker judges them).
	Frozen          int `json:"frozen"`
	HandedFrozen    int `json:"handed_while_frozen"`
	TakenBeforeCont int `json:"taken_before_thaw"`
	LeaseAfterCont  int `json:"lease_after_thaw"`
	// leave-queue: waiters that left while queued, by how, and those whose
	// lease.Client.Close returned (their leave done) before they exited.
	Left   map[string]int `json:"left,omitempty"`
	Closed int            `json:"closed"`
	// NotQueued counts waiter processes that never queued (the lock was
	// free at each try) or failed to start.
	NotQueued int `json:"not_queued"`
}

// ticketTTL is how long a fair waiter's ticket lives without renewal in
// fencelock's lease (its unexported ticketTTL; the README states it).
const ticketTTL = 2 * time.Second

// waiters is what the process faults need of a kind: fencelock's fair
// lease on one Redis.
type waiters struct {
	spec    waiterSpec    // Addr and credentials, TTL
	rdb     *redis.Client // the watcher's own connection
	inspect *lease.Client
	first   int // client number (lane) of the first waiter process
	groups  []group

	mu    sync.Mutex
	stats WaiterStats
}

// count updates the stats.
func (w *waiters) count(f func(s *WaiterStats)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.stats)
}

// Stats returns a copy of the stats.
func (w *waiters) Stats() WaiterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	if s.Left != nil {
		s.Left = maps.Clone(s.Left)
	}
	return s
}

func newWaiters(opt *redis.Options, ttl time.Duration, firstClient int, gs []group) (*waiters, error) {
	o := *opt
	o.ContextTimeoutEnabled = true
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, 200*time.Millisecond, 200*time.Millisecond
	o.MaxRetries = -1
	rdb := redis.NewClient(&o)
	lc, err := lease.New(rdb)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &waiters{
		spec: waiterSpec{Addr: opt.Addr, Username: opt.Username, Password: opt.Password, DB: opt.DB, TTL: ttl,
			QueuedAfter: 30 * time.Millisecond, AfterThaw: ttl, Hold: 20 * time.Millisecond},
		rdb: rdb, inspect: lc, first: firstClient, groups: gs,
	}, nil
}

func (w *waiters) close() { w.rdb.Close() }

// specs is the waiter processes of window win: one per lock group.
func (w *waiters) specs(win check.Window) []waiterSpec {
	var out []waiterSpec
	for _, g := range w.groups {
		s := w.spec
		s.Lock = g.lock
		s.Mode = waitPause
		if win.Fault == check.FaultLeaveQueue {
			s.Mode = waitLeave
		}
		out = append(out, s)
	}
	return out
}

// holderNow reads lock's holder from Redis ("" when free or unreadable).
func (w *waiters) holderNow(ctx context.Context, lock string) (string, uint64, bool) {
	ictx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	info, err := w.inspect.Inspect(ictx, lock)
	if err != nil {
		return "", 0, false
	}
	return info.Holder, info.Token.Seq, true
}

// ready starts the waiter (it is told "go") and waits until it is queued.
// A result instead means it never queued: its leases are recorded and the
// reason returned as an error.
func (n *nemesis) ready(p *waiterProc, client int, lock string) error {
	if _, err := p.expect(15*time.Second, lineReady); err != nil {
		n.w.count(func(s *WaiterStats) { s.NotQueued++ })
		return fmt.Errorf("%w: %w", errNotReady, err)
	}
	// Queue among clients that take the lock in turn: after a fault the
	// clients may need a moment to get going again, and a waiter frozen
	// in a queue that does not move is never handed the lock.
	for t := time.Now(); time.Since(t) < 2*time.Second; time.Sleep(5 * time.Millisecond) {
		if last := n.rec.LastAcquired(lock); last > 0 && n.rec.Now()-last < 50*time.Millisecond {
			break
		}
	}
	if err := p.send("go"); err != nil {
		return err
	}
	l, err := p.expect(5*time.Second, lineQueued, lineResult)
	if err != nil {
		return err
	}
	if l == lineQueued {
		return nil
	}
	r, err := parseResult(l)
	if err != nil {
		return err
	}
	n.recordWaiterLeases(client, lock, r, "a waiter process that never queued")
	n.w.count(func(s *WaiterStats) { s.NotQueued++ })
	return fmt.Errorf("never queued: %s", r.Err)
}

// recordWaiterLeases adds the leases a waiter process reported to the
// history.
func (n *nemesis) recordWaiterLeases(client int, lock string, r waiterResult, note string) []check.Lease {
	var out []check.Lease
	for i, wl := range r.Leases { // the lock's holder id (Token.Holder) names them
		l := check.Lease{Client: client, Lock: lock, Token: wl.Token,
			Start: n.offset(wl.Returned), Deadline: max(n.offset(wl.Deadline), 1), Released: n.offset(wl.Released),
			Held: wl.Held, Note: note}
		if i < r.Immediate {
			l.Note = "a waiter process: the lock was free, released at once"
		}
		l.ID = n.rec.AddLease(l)
		out = append(out, l)
	}
	return out
}

// offset converts Unix ns reported by a waiter process (its wall clock) to
// the history's offsets (on this process's monotonic clock), through the
// two clocks read now rather than at the run's start: the instants are
// recent, so a step of the wall clock meanwhile does not shift them. 0
// stays 0: none.
func (n *nemesis) offset(unixNs int64) time.Duration {
	if unixNs == 0 {
		return 0
	}
	now, wall := n.rec.Now(), time.Now().UnixNano()
	return max(now-time.Duration(wall-unixNs), 1)
}

// inParallel runs f for each waiter process (one per group) at once and
// joins their details.
func (n *nemesis) inParallel(ps []*waiterProc, first int, f func(i int, p *waiterProc) (string, error)) (string, error) {
	details := make([]string, len(ps))
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			details[i], errs[i] = f(i, p)
		}()
	}
	wg.Wait()
	var ok []string
	var bad []string
	for i := range ps {
		if errs[i] != nil {
			bad = append(bad, fmt.Sprintf("waiter %d: %v", first+i, errs[i]))
		} else {
			ok = append(ok, details[i])
		}
	}
	if len(ok) == 0 {
		return "", fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return strings.Join(append(ok, bad...), "; "), nil
}

// pauseWaiters is the pause-waiter fault: each waiter process queues for
// its group's lock and is frozen (SIGSTOP) there. The nemesis watches the
// lock in Redis: a holder that no client of the run has, holding it for a
// quarter of the ttl, is the lock handed to the frozen waiter; once another
// holder has it (the handed-off lease expired and the next waiter took the
// lock) and that client's Acquire returned, the waiter is thawed (SIGCONT),
// and it reports what its Acquire returned, which the history records as a
// lease. If no handoff reaches it within the ticket lifetime, it is thawed
// all the same.
func (n *nemesis) pauseWaiters(ps []*waiterProc) (string, error) {
	return n.inParallel(ps, n.w.first, func(i int, p *waiterProc) (string, error) {
		client, lock := n.w.first+i, n.w.groups[i].lock
		defer p.kill()
		if err := n.ready(p, client, lock); err != nil {
			return "", err
		}
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return "", err
		}
		stopped := n.rec.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !faults.WaitStopped(ctx, p.cmd.Process.Pid, 2*time.Second) {
			return "", fmt.Errorf("the waiter process was not seen stopped")
		}
		ttl := n.w.spec.TTL
		var cur, handed, taken check.Seen
		for {
			h, seq, ok := n.w.holderNow(ctx, lock)
			now := n.rec.Now()
			if ok {
				if h != cur.Holder {
					cur = check.Seen{Holder: h, Seq: seq, First: now}
				}
				cur.Last = now
			}
			switch {
			case handed.Holder == "":
				if cur.Holder != "" && cur.Last-cur.First >= ttl/4 && !n.rec.KnownHolder(cur.Holder) {
					handed = cur
				}
			case cur.Holder == handed.Holder:
				handed = cur
			case cur.Holder != "":
				taken = cur
			}
			if taken.Holder != "" {
				break
			}
			if handed.Holder == "" && now-stopped > ticketTTL+ttl/2 {
				break // its ticket expired before the queue reached it
			}
			if handed.Holder != "" && now-handed.First > ttl+time.Second {
				break // held past its ttl: something else is wrong
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Thaw once the taker's Acquire returned (its lease is recorded),
		// so that the frozen waiter's wakeup meets a held lease.
		for t := time.Now(); taken.Holder != "" && !n.rec.KnownHolder(taken.Holder) && time.Since(t) < 100*time.Millisecond; {
			time.Sleep(time.Millisecond)
		}
		thawed := n.rec.Now()
		if err := p.signal(syscall.SIGCONT); err != nil {
			return "", err
		}
		l, err := p.expect(n.w.spec.AfterThaw+n.w.spec.Hold+5*time.Second, lineResult)
		if err != nil {
			return "", err
		}
		r, err := parseResult(l)
		if err != nil {
			return "", err
		}
		n.rec.AddFrozen(check.Frozen{Client: client, Lock: lock, Stopped: stopped, Thawed: thawed, Handed: handed, Taken: taken})
		note := fmt.Sprintf("a waiter process frozen while queued (SIGSTOP at %s, SIGCONT at %s)", fmtOff(stopped), fmtOff(thawed))
		ls := n.recordWaiterLeases(client, lock, r, note)
		n.w.count(func(s *WaiterStats) {
			s.Frozen++
			if handed.Holder != "" {
				s.HandedFrozen++
			}
			if taken.Holder != "" {
				s.TakenBeforeCont++
			}
			if r.Err == "" && len(ls) > r.Immediate {
				s.LeaseAfterCont++
			}
		})

		var d strings.Builder
		fmt.Fprintf(&d, "waiter %d queued for %s, SIGSTOP at %s", client, lock, fmtOff(stopped))
		switch {
		case handed.Holder == "":
			fmt.Fprintf(&d, "; no handoff reached it in %s (its ticket expired)", fmtOff(thawed-stopped))
		default:
			fmt.Fprintf(&d, "; handed the lock (token %d, seen in Redis) at %s", handed.Seq, fmtOff(handed.First))
			if taken.Holder != "" {
				who := "a holder"
				if tl, ok := n.rec.HolderLease(taken.Holder); ok {
					who = fmt.Sprintf("client %d", tl.Client)
				}
				fmt.Fprintf(&d, "; %s took it (token %d) at %s", who, taken.Seq, fmtOff(taken.First))
			}
		}
		fmt.Fprintf(&d, "; SIGCONT at %s", fmtOff(thawed))
		switch {
		case r.Returned == 0:
			fmt.Fprintf(&d, "; its Acquire did not return: %s", r.Err)
		case r.Err != "":
			fmt.Fprintf(&d, "; its Acquire returned %s after: %s", fmtOff(n.offset(r.Returned)-thawed), oneLine(r.Err))
		case len(ls) > 0:
			last := ls[len(ls)-1]
			fmt.Fprintf(&d, "; its Acquire returned %s after: Held() %v, token %d, deadline %s later",
				fmtOff(last.Start-thawed), last.Held, last.Token.Seq, fmtOff(last.Deadline-last.Start))
		}
		return d.String(), nil
	})
}

// leaveHows is how a leave-queue waiter leaves, picked by the window's
// target and the group.
var leaveHows = []string{"cancel", "sigterm", "kill"}

// leaveQueue is the leave-queue fault: each waiter process queues for its
// group's lock and, a moment later, leaves: its context ends ("cancel"), it
// gets SIGTERM and its handler ends the context, or it is killed. A clean
// leaver closes its lock client (waiting for its leave) before it exits.
// From its queueing until the liveness bound after it is gone, a watcher
// reads the lock's holder in Redis; the [check.Leave] with what it saw is
// recorded when the watch ends, in the background.
func (n *nemesis) leaveQueue(w check.Window, ps []*waiterProc) (string, error) {
	return n.inParallel(ps, n.w.first+len(n.w.groups), func(i int, p *waiterProc) (string, error) {
		client, lock := n.w.first+len(n.w.groups)+i, n.w.groups[i].lock
		how := leaveHows[(int(w.Target)+i)%len(leaveHows)]
		linger := 20*time.Millisecond + time.Duration((int(w.Target>>8)+37*i)%80)*time.Millisecond
		defer p.kill()
		if err := n.ready(p, client, lock); err != nil {
			return "", err
		}
		queued := n.rec.Now()
		watch := n.watch(lock)
		time.Sleep(linger)
		left := n.rec.Now()
		var err error
		switch how {
		case "cancel":
			err = p.send("cancel")
		case "sigterm":
			err = p.signal(syscall.SIGTERM)
		default:
			err = p.signal(syscall.SIGKILL)
		}
		if err != nil {
			select {
			case <-p.exited: // it ended by itself: its Acquire returned
				err = nil
			default:
			}
		}
		if err != nil || !p.wait(5*time.Second) {
			watch(0, nil)
			return "", fmt.Errorf("the waiter process did not leave (%v)", err)
		}
		var r waiterResult
		for l := range p.lines {
			if strings.HasPrefix(l, lineResult+" ") {
				r, _ = parseResult(l)
			}
		}
		gone := n.rec.Offset(p.gone)
		lv := check.Leave{Client: client, Lock: lock, How: how, Queued: queued, Left: left, Gone: gone, Closed: r.Closed}
		switch {
		case r.Returned != 0 && r.Err == "":
			lv.Acquired = true
			lv.Note = "the lock reached it before it left"
		case r.Returned != 0 && r.Left == 0:
			lv.Note = "its Acquire ended before it was told to leave: " + oneLine(r.Err)
		}
		n.recordWaiterLeases(client, lock, r, "a waiter process about to leave the queue")
		if r.CloseErr != "" {
			lv.Note = strings.TrimPrefix(lv.Note+"; ", "; ") + "Close: " + r.CloseErr
		}
		watch(gone+n.w.spec.TTL+ticketTTL+300*time.Millisecond, &lv)
		n.w.count(func(s *WaiterStats) {
			if s.Left == nil {
				s.Left = map[string]int{}
			}
			s.Left[how]++
			if r.Closed {
				s.Closed++
			}
		})

		d := fmt.Sprintf("waiter %d queued for %s at %s, left by %s %s later, gone at %s", client, lock, fmtOff(queued), how,
			fmtOff(left-queued), fmtOff(gone))
		switch {
		case how == "kill":
		case r.Closed:
			d += ", after Close"
		default:
			d += ", Close failed: " + r.CloseErr
		}
		if lv.Note != "" {
			d += "; " + lv.Note
		}
		return d, nil
	})
}

// watch starts reading lock's holder every 5 ms. The function it returns
// sets until when to go on (an offset of the history) and the leave to
// record, with what was seen, once the watch ends (nil: nothing); the
// nemesis waits for the watch before it returns.
func (n *nemesis) watch(lock string) func(until time.Duration, lv *check.Leave) {
	type end struct {
		until time.Duration
		lv    *check.Leave
	}
	ch := make(chan end, 1)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var seen []check.Seen
		var e *end
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if e == nil {
				select {
				case got := <-ch:
					e = &got
				default:
				}
			}
			now := n.rec.Now()
			if e != nil && now >= e.until {
				break
			}
			if h, seq, ok := n.w.holderNow(ctx, lock); ok && h != "" {
				if k := len(seen) - 1; k >= 0 && seen[k].Holder == h {
					seen[k].Last = now
				} else {
					seen = append(seen, check.Seen{Holder: h, Seq: seq, First: now, Last: now})
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
		if e.lv != nil {
			e.lv.Seen, e.lv.Watched = seen, n.rec.Now()
			n.rec.AddLeave(*e.lv)
		}
	}()
	return func(until time.Duration, lv *check.Leave) { ch <- end{until, lv} }
}

// fmtOff prints an offset of the history, to the millisecond.
func fmtOff(d time.Duration) string { return d.Round(time.Millisecond).String() }
