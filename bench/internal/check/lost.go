package check

import (
	"fmt"
	"slices"
)

// CheckLostUpdates checks that every acknowledged increment and append is
// in the final state, read after the faults healed.
//
// Counters (resources with incr ops): acknowledged increments are numbered
// by the value they wrote, so two of them that wrote the same value mean one
// overwrote the other (duplicate-incr), and one that wrote more than the
// final value was overwritten by a stale write (rolled-back). If the final
// counter, less its initial value, is below the number of acknowledged
// increments, the shortfall is reported as lost-increment when no op-level
// anomaly above explains it already; above acknowledged plus unknown
// increments, some failed increment took effect (extra-increments).
//
// Sets (resources with append ops): each acknowledged element must be in
// the final set (lost-append); an element whose appends all failed must not
// be (phantom). Unknown appends may go either way.
//
// init gives the counters' initial values (absent: 0).
func CheckLostUpdates(h History, final Final, init map[string]int64) Result {
	res := Result{Checker: CheckerLostUpdate}
	incrs := map[string][]*Op{}
	appends := map[string][]*Op{}
	for i := range h.Ops {
		op := &h.Ops[i]
		switch op.Kind {
		case KindIncr:
			incrs[op.Resource] = append(incrs[op.Resource], op)
		case KindAppend:
			appends[op.Resource] = append(appends[op.Resource], op)
		default:
			continue
		}
		res.Checked++
	}
	for _, r := range sortedKeys(incrs) {
		v, ok := final.Registers[r]
		if !ok {
			res.Skipped += len(incrs[r])
			res.Notes = append(res.Notes, fmt.Sprintf("counter %q missing from the final state", r))
			continue
		}
		res.Anomalies = append(res.Anomalies, lostIncrements(r, incrs[r], v, init[r])...)
	}
	for _, r := range sortedKeys(appends) {
		elems, ok := final.Sets[r]
		if !ok {
			res.Skipped += len(appends[r])
			res.Notes = append(res.Notes, fmt.Sprintf("set %q missing from the final state", r))
			continue
		}
		res.Anomalies = append(res.Anomalies, lostAppends(r, appends[r], elems)...)
	}
	return res
}

func lostIncrements(resource string, ops []*Op, final, init int64) []Anomaly {
	var out []Anomaly
	byValue := map[int64][]int{}
	var values []int64
	acked, unknown := 0, 0
	for _, op := range ops {
		switch op.Outcome {
		case Ok:
			acked++
			if len(byValue[op.Value]) == 0 {
				values = append(values, op.Value)
			}
			byValue[op.Value] = append(byValue[op.Value], op.ID)
		case Unknown:
			unknown++
		}
	}
	slices.Sort(values)
	explained := 0
	for _, v := range values {
		ids := byValue[v]
		if len(ids) > 1 {
			out = append(out, Anomaly{
				Checker: CheckerLostUpdate, Kind: AnomalyDuplicateIncr, Resource: resource, Ops: ids,
				Count:  len(ids) - 1,
				Detail: fmt.Sprintf("%d acknowledged increments all wrote %d: %d lost", len(ids), v, len(ids)-1),
			})
			explained += len(ids) - 1
		}
		if v > final {
			out = append(out, Anomaly{
				Checker: CheckerLostUpdate, Kind: AnomalyRolledBack, Resource: resource, Ops: ids,
				Count:  1,
				Detail: fmt.Sprintf("acknowledged increment wrote %d but the final counter is %d", v, final),
			})
			explained++
		}
	}
	grown := final - init
	if short := int64(acked) - grown; short > int64(explained) {
		n := int(short) - explained
		out = append(out, Anomaly{
			Checker: CheckerLostUpdate, Kind: AnomalyLostIncr, Resource: resource, Count: n,
			Detail: fmt.Sprintf("%d acknowledged increments but the counter grew by %d", acked, grown),
		})
	}
	if extra := grown - int64(acked+unknown); extra > 0 {
		out = append(out, Anomaly{
			Checker: CheckerLostUpdate, Kind: AnomalyExtraIncr, Resource: resource, Count: int(extra),
			Detail: fmt.Sprintf("the counter grew by %d with only %d acknowledged and %d unknown increments",
				grown, acked, unknown),
		})
	}
	return out
}

func lostAppends(resource string, ops []*Op, final []int64) []Anomaly {
	var out []Anomaly
	present := make(map[int64]bool, len(final))
	for _, e := range final {
		present[e] = true
	}
	// per element: any ok / any unknown / failed op ids
	type fate struct {
		ok, unknown bool
		failed      []int
	}
	fates := map[int64]*fate{}
	for _, op := range ops {
		f := fates[op.Value]
		if f == nil {
			f = &fate{}
			fates[op.Value] = f
		}
		switch op.Outcome {
		case Ok:
			f.ok = true
			if !present[op.Value] {
				out = append(out, Anomaly{
					Checker: CheckerLostUpdate, Kind: AnomalyLostAppend, Resource: resource,
					Ops: []int{op.ID}, Count: 1,
					Detail: fmt.Sprintf("acknowledged element %d is not in the final set", op.Value),
				})
			}
		case Unknown:
			f.unknown = true
		default:
			f.failed = append(f.failed, op.ID)
		}
	}
	elems := make([]int64, 0, len(fates))
	for e := range fates {
		elems = append(elems, e)
	}
	slices.Sort(elems)
	for _, e := range elems {
		f := fates[e]
		if present[e] && !f.ok && !f.unknown {
			out = append(out, Anomaly{
				Checker: CheckerLostUpdate, Kind: AnomalyPhantom, Resource: resource, Ops: f.failed, Count: 1,
				Detail: fmt.Sprintf("element %d is in the final set but its append failed", e),
			})
		}
	}
	return out
}
