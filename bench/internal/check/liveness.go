package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// LivenessOptions are the bounds of [CheckLiveness].
type LivenessOptions struct {
	// TTL is the locks' ttl.
	TTL time.Duration
	// TicketTTL is how long a queued waiter's ticket lives without renewal
	// (fencelock's fair lease: 2s).
	TicketTTL time.Duration
	// Slack is added to the bound for the measurement (a client tries the
	// lock a moment after it expired; default 250ms).
	Slack time.Duration
}

// CheckLiveness checks that a waiter that leaves the queue does not leave
// the lock stuck. For each recorded [Leave]:
//
//   - some client gets the lock within TTL + TicketTTL (+ Slack) after the
//     leaver's process is gone: the lock's liveness bound, a ttl plus the
//     ticket lifetime of a waiter that died. A later acquisition is a
//     [AnomalyStuck], unless another fault window (a paused server, a
//     paused holder…) fell in that stretch; no acquisition at all before
//     the run ended, with less than the bound left, is undecided;
//   - a waiter that left cleanly ([Leave.Clean]: its context ended or it
//     handled SIGTERM, and it waited for its leave before exiting) takes
//     its ticket with it: a holder read from the server that no lease of
//     the run has (nor a frozen waiter: [History.Frozen]), first read
//     after the leaver was told to leave (and
//     within TicketTTL of its leaving), holding the lock for at least TTL/4
//     after the leaver was gone, is the lock handed to the gone leaver
//     ([AnomalyHandedToGhost]; put down to the last waiter that left that
//     lock before it). For a waiter that was killed, or that could not wait
//     for its leave, that is noted, not counted: its ticket may outlive it
//     by design, for TicketTTL.
func CheckLiveness(h History, faults []Window, o LivenessOptions) Result {
	res := Result{Checker: CheckerLiveness}
	if o.Slack == 0 {
		o.Slack = 250 * time.Millisecond
	}
	bound := o.TTL + o.TicketTTL + o.Slack
	known := map[string]bool{} // holders of the run's leases, and of locks handed to frozen waiters
	for i := range h.Leases {
		known[h.Leases[i].HolderID()] = true
	}
	for _, f := range h.Frozen {
		known[f.Handed.Holder] = true
	}
	span := h.Span()
	var stalls []time.Duration
	for i := range h.Leaves {
		l := &h.Leaves[i]
		res.Checked++
		var next *Lease
		for j := range h.Leases {
			c := &h.Leases[j]
			if c.Lock == l.Lock && c.Client != l.Client && c.Start > l.Gone && (next == nil || c.Start < next.Start) {
				next = c
			}
		}
		who := fmt.Sprintf("waiter %d (%s) that left %s", l.Client, l.How, l.Lock)
		if next != nil {
			stalls = append(stalls, next.Start-l.Gone)
		}
		switch {
		case next == nil && span < l.Gone+bound:
			res.Skipped++
			res.Notes = append(res.Notes, fmt.Sprintf("%s at %s: the run ended %s later with no client taking the lock: undecided",
				who, fmtDur(l.Gone), fmtDur(span-l.Gone)))
		case next == nil || next.Start-l.Gone > bound:
			until := span
			if next != nil {
				until = next.Start
			}
			if w, ok := otherFault(faults, l.Gone-o.TTL, until); ok {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: the lock was taken again %s after it was gone, during %s at %s: not counted",
					who, fmtDur(until-l.Gone), w.Fault, fmtDur(w.Start)))
				break
			}
			a := Anomaly{Checker: CheckerLiveness, Kind: AnomalyStuck, Resource: l.Lock, Count: 1}
			if next == nil {
				a.Detail = fmt.Sprintf("%s: no client got the lock in the %s from its exit (%s) to the end of the run; the bound is %s",
					who, fmtDur(span-l.Gone), fmtDur(l.Gone), fmtDur(bound))
			} else {
				a.Leases = []int{next.ID}
				a.Detail = fmt.Sprintf("%s: the next client got the lock %s after its exit (%s), above the bound of %s (ttl + ticket lifetime)",
					who, fmtDur(next.Start-l.Gone), fmtDur(l.Gone), fmtDur(bound))
			}
			res.Anomalies = append(res.Anomalies, a)
		}
	}
	if len(stalls) > 0 {
		slices.Sort(stalls)
		res.Notes = append(res.Notes, fmt.Sprintf("%d %s left: the lock was next acquired %s after the leaver was gone (median), %s at most; the bound is %s",
			len(h.Leaves), plural(len(h.Leaves), "waiter", "waiters"), fmtDur(stalls[len(stalls)/2]), fmtDur(stalls[len(stalls)-1]), fmtDur(bound)))
	}
	notes, anomalies := ghosts(h, known, o)
	res.Notes = append(res.Notes, notes...)
	res.Anomalies = append(res.Anomalies, anomalies...)
	return res
}

// ghosts finds the lock handed to a waiter that had left: a holder read
// from the server while a leave was watched that no lease of the run has.
// Each is put down to the last waiter that left that lock before it was
// first read (if within the ticket lifetime of its leaving), and counts when
// it held the lock for TTL/4 after that waiter was gone.
func ghosts(h History, known map[string]bool, o LivenessOptions) (notes []string, out []Anomaly) {
	type ghost struct {
		Seen
		lock string
	}
	byHolder := map[string]*ghost{}
	for i := range h.Leaves {
		l := &h.Leaves[i]
		for _, s := range l.Seen {
			if known[s.Holder] {
				continue
			}
			g := byHolder[s.Holder]
			if g == nil {
				byHolder[s.Holder] = &ghost{Seen: s, lock: l.Lock}
				continue
			}
			g.First, g.Last = min(g.First, s.First), max(g.Last, s.Last)
		}
	}
	gs := make([]*ghost, 0, len(byHolder))
	for _, g := range byHolder {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *ghost) int { return cmp.Or(cmp.Compare(a.First, b.First), cmp.Compare(a.Holder, b.Holder)) })
	for _, g := range gs {
		var l *Leave
		for i := range h.Leaves {
			c := &h.Leaves[i]
			if c.Lock == g.lock && c.Left <= g.First && (l == nil || c.Left > l.Left) {
				l = c
			}
		}
		if l == nil || g.First > l.Left+o.TicketTTL+o.Slack || g.Last-max(g.First, l.Gone) < o.TTL/4 {
			continue // none of a leaver's doing, or a moment's (a lock passed on by a leave)
		}
		d := fmt.Sprintf("waiter %d (%s) that left %s: the lock was handed to it after it was gone at %s (holder %s, token %d, in Redis from %s to %s)",
			l.Client, l.How, l.Lock, fmtDur(l.Gone), short(g.Holder), g.Seq, fmtDur(g.First), fmtDur(g.Last))
		if l.Clean() {
			out = append(out, Anomaly{Checker: CheckerLiveness, Kind: AnomalyHandedToGhost, Resource: l.Lock, Count: 1,
				Detail: d + ": a waiter that leaves must take its ticket with it"})
			continue
		}
		why := "it was killed: its ticket lives on until it expires"
		if l.How != "kill" {
			why = "it did not wait for its leave to finish before exiting (its lock client's Close did not return)"
		}
		notes = append(notes, d+"; not counted: "+why)
	}
	return notes, out
}

// otherFault finds a fault window other than a leaving waiter's that
// intersects [from, to].
func otherFault(faults []Window, from, to time.Duration) (Window, bool) {
	for _, w := range faults {
		if w.Fault != FaultLeaveQueue && w.Start <= to && w.End() >= from {
			return w, true
		}
	}
	return Window{}, false
}
