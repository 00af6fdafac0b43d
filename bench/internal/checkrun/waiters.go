package checkrun

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/lease"
)

// The pause-waiter and leave-queue faults: a waiter process per lock group
// queues for the group's lock, among the run's clients, and is frozen
// across a handoff to it, or leaves.
//
// This file holds what the nemesis keeps for them: the counts, the waiter
// specs, and the watcher that reads a lock's holder in Redis;
// waiters_nemesis.go has the steps both faults share, waiters_pause.go and
// waiters_leave.go each fault.

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
// fencelock's lease (its unexported ticketTTL; the lease package doc states it).
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
