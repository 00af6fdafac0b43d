package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fencelock/fencelock/lease"
)

// CheckPermits checks a semaphore's bound on the accepted writes: at most
// permits holders write at once. It looks at the acknowledged writes whose
// token names a semaphore's permit (Token.Key is NAME#slot, see
// [lease.PermitName]), fenced or not, grouped by semaphore. A holder's
// tenure, as the storage saw it, runs from its first accepted write to its
// last, in commit order ([Op.Commit]; an acknowledged write without one is
// skipped); a holder whose tenure begins while permits others' are open
// (their first write committed before, their last after) is one holder too
// many: an [AnomalyOverPermits] naming its first write and one write of
// each open holder.
//
// Per slot, the fenced-mutex checker judges the same writes as a lock's
// (a stale write accepted after the slot's next holder wrote, or, without
// tokens, two holders' writes interleaved), and the exclusion checker the
// permits' leases: with each slot kept, no more than permits holders can
// overlap, so this checker finds what those find per slot, seen across the
// slots. A holder with one accepted write has no tenure to overlap.
func CheckPermits(h History, permits int) Result {
	res := Result{Checker: CheckerPermits}
	bySem := map[string]map[string]*tenure{}
	for i := range h.Ops {
		op := &h.Ops[i]
		if !op.Kind.IsWrite() || op.Outcome != Ok {
			continue
		}
		sem, _, ok := lease.ParsePermitName(op.Token.Key)
		if !ok {
			continue
		}
		if op.Commit == 0 {
			res.Skipped++
			continue
		}
		res.Checked++
		ts := bySem[sem]
		if ts == nil {
			ts = map[string]*tenure{}
			bySem[sem] = ts
		}
		t := ts[op.HolderID()]
		if t == nil {
			ts[op.HolderID()] = &tenure{holder: op.HolderID(), first: op, last: op}
			continue
		}
		if op.Commit < t.first.Commit {
			t.first = op
		}
		if op.Commit > t.last.Commit {
			t.last = op
		}
	}
	if res.Skipped > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d acknowledged %s without a commit sequence, not ordered",
			res.Skipped, plural(res.Skipped, "write", "writes")))
	}
	for _, sem := range sortedKeys(bySem) {
		ts := make([]*tenure, 0, len(bySem[sem]))
		for _, t := range bySem[sem] {
			ts = append(ts, t)
		}
		slices.SortFunc(ts, func(a, b *tenure) int { return cmp.Compare(a.first.Commit, b.first.Commit) })
		var open []*tenure // tenures whose last write may come after the next one's first
		var ep *episode
		for _, t := range ts {
			kept := open[:0]
			for _, o := range open {
				if o.last.Commit > t.first.Commit {
					kept = append(kept, o)
				}
			}
			open = kept
			if len(open) >= permits {
				if ep == nil || t.first.Commit > ep.end {
					if ep != nil {
						res.Anomalies = append(res.Anomalies, ep.anomaly(sem, permits))
					}
					ep = &episode{}
				}
				ep.add(append(slices.Clone(open), t))
			}
			if t.last.Commit > t.first.Commit {
				open = append(open, t)
			}
		}
		if ep != nil {
			res.Anomalies = append(res.Anomalies, ep.anomaly(sem, permits))
		}
	}
	return res
}

// tenure is one holder's accepted writes to a semaphore's resources: the
// first and the last in commit order.
type tenure struct {
	holder      string
	first, last *Op
}

// episode is a stretch of commit order in which more holders wrote at
// once than there are permits: one anomaly.
type episode struct {
	tenures []*tenure // in order of their first write
	peak    int       // the most at once
	end     uint64    // the last commit of its tenures
}

// add records that the tenures ts were open at once.
func (e *episode) add(ts []*tenure) {
	e.peak = max(e.peak, len(ts))
	for _, t := range ts {
		if !slices.Contains(e.tenures, t) {
			e.tenures = append(e.tenures, t)
			e.end = max(e.end, t.last.Commit)
		}
	}
}

func (e *episode) anomaly(sem string, permits int) Anomaly {
	var ops []int
	var who []string
	for _, t := range e.tenures {
		ops = append(ops, t.first.ID, t.last.ID)
		who = append(who, fmt.Sprintf("%s on %s (#%d to #%d)", short(t.holder), t.first.Token.Key, t.first.ID, t.last.ID))
	}
	slices.Sort(ops)
	ops = slices.Compact(ops)
	if len(who) > 6 {
		who = append(who[:6], fmt.Sprintf("%d more", len(who)-6))
	}
	return Anomaly{Checker: CheckerPermits, Kind: AnomalyOverPermits, Resource: sem, Ops: ops, Count: 1,
		Detail: fmt.Sprintf("up to %d holders at once between their first and last accepted writes, %d permits: %s",
			e.peak, permits, strings.Join(who, ", "))}
}
