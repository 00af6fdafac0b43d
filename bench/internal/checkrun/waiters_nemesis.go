package checkrun

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
)

// The nemesis's steps shared by the pause-waiter and leave-queue faults:
// readying a waiter process, recording its leases, converting its clock to
// the history's, running one per group at once, and printing offsets.

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
func (n *nemesis) offset(unixNs int64) time.Duration { return wallOffset(n.rec, unixNs) }

// wallOffset is [nemesis.offset] for any recorder: Unix ns another process
// reported, as an offset of rec's history (0 stays 0).
func wallOffset(rec *check.Recorder, unixNs int64) time.Duration {
	if unixNs == 0 {
		return 0
	}
	now, wall := rec.Now(), time.Now().UnixNano()
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

// fmtOff prints an offset of the history, to the millisecond.
func fmtOff(d time.Duration) string { return d.Round(time.Millisecond).String() }
