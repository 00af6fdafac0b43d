package checkrun

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
)

// The leave-queue fault: a queued waiter process leaves (cancel, SIGTERM or
// kill) while a watcher reads the lock's holder in Redis.

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
