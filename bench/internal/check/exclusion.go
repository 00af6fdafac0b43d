package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// CheckExclusion checks the lock's exclusion property on the recorded
// leases: the validity windows of two leases of one lock, held by different
// holders, never overlap. A lease's window runs from the moment its Acquire
// returned to its local deadline, or to the call of its Release when that
// came first ([Lease.End]); windows that merely touch (one ends when the
// next starts) do not overlap.
//
// Only leases with a local deadline are judged (fencelock's kinds). A pause
// of a holder after its Acquire returned cannot make its window overlap
// another: the window ends at the deadline whatever the holder does, so
// such a pause is Kleppmann's case, for the verifier, and not seen here.
//
// An overlap that a fault which loses Redis data explains is not counted
// ([Fault.LosesData]: a failover, a restart without persistence, eviction,
// early expiry): a window of faults that began before the later lease
// started and ended after the earlier one started. Those are listed in the
// notes. Every other overlap is a lock bug: an [AnomalyOverlap] naming both
// leases (and the operations their holders ran, for the timeline).
func CheckExclusion(h History, faults []Window) Result {
	res := Result{Checker: CheckerExclusion}
	byLock := map[string][]*Lease{}
	for i := range h.Leases {
		l := &h.Leases[i]
		if l.Deadline == 0 {
			continue
		}
		res.Checked++
		if l.Judged() {
			byLock[l.Lock] = append(byLock[l.Lock], l)
		}
	}
	opsOf := map[string][]int{} // op ids by holder id
	for i := range h.Ops {
		if hid := h.Ops[i].Holder; hid != "" {
			opsOf[hid] = append(opsOf[hid], h.Ops[i].ID)
		}
	}
	explained := map[Fault]int{}
	for _, lock := range sortedKeys(byLock) {
		ls := byLock[lock]
		slices.SortStableFunc(ls, func(a, b *Lease) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.ID, b.ID))
		})
		var open []*Lease // windows that may still reach the next start
		for _, b := range ls {
			kept := open[:0]
			for _, a := range open {
				if a.End() > b.Start {
					kept = append(kept, a)
				}
			}
			open = kept
			for _, a := range open {
				if a.HolderID() == b.HolderID() {
					continue // one holder's own leases (a re-acquire)
				}
				if w, ok := explainedBy(faults, a, b); ok {
					explained[w.Fault]++
					continue
				}
				res.Anomalies = append(res.Anomalies, overlap(lock, a, b, opsOf))
			}
			open = append(open, b)
		}
	}
	if len(explained) > 0 {
		var parts []string
		n := 0
		for _, f := range AllFaults {
			if explained[f] > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", f, explained[f]))
				n += explained[f]
			}
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%d %s explained by faults that lose Redis data, not counted (%s)",
			n, plural(n, "overlap", "overlaps"), strings.Join(parts, ", ")))
	}
	return res
}

// explainedBy finds a data-loss fault window that explains the overlap of
// a (started first) and b: it began before b started and ended after a
// started.
func explainedBy(faults []Window, a, b *Lease) (Window, bool) {
	for _, w := range faults {
		if w.Fault.LosesData() && w.Start <= b.Start && a.Start <= w.End() {
			return w, true
		}
	}
	return Window{}, false
}

func overlap(lock string, a, b *Lease, opsOf map[string][]int) Anomaly {
	by := min(a.End(), b.End()) - b.Start
	var ops []int
	for _, l := range []*Lease{a, b} {
		for _, id := range opsOf[l.Holder] {
			if !slices.Contains(ops, id) {
				ops = append(ops, id)
			}
		}
	}
	slices.Sort(ops)
	d := fmt.Sprintf("%s overlaps %s by %s: two holders of %s at once", describeLease(b), describeLease(a), fmtDur(by), lock)
	return Anomaly{Checker: CheckerExclusion, Kind: AnomalyOverlap, Resource: lock, Ops: ops,
		Leases: []int{a.ID, b.ID}, Count: 1, Detail: d}
}

func describeLease(l *Lease) string {
	s := fmt.Sprintf("client %d's lease #%d", l.Client, l.ID)
	if l.Token.Seq > 0 {
		s += fmt.Sprintf(" (token %s)", l.Token)
	}
	end := "deadline"
	if l.Released != 0 && l.Released < l.Deadline {
		end = "release"
	}
	s += fmt.Sprintf(" [%s, %s %s]", fmtDur(l.Start), end, fmtDur(l.End()))
	if l.Note != "" {
		s += ", " + l.Note
	}
	return s
}
