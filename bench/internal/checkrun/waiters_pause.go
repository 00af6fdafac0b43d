package checkrun

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// The pause-waiter fault: a queued waiter process frozen across a handoff
// of its lock, then thawed.

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
