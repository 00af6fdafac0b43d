package check

import (
	"cmp"
	"fmt"
	"slices"
)

// CheckFencedMutex checks the fenced-mutex model (Hazelcast's FencedLock,
// and the verifier's acceptance rule): per resource, in the storage's commit
// order, every accepted write's token supersedes the highest token accepted
// before it — a greater Seq, or the same Seq from the same holder.
//
// Acknowledged writes are ordered by [Op.Commit]; one without a commit
// sequence cannot be placed and is counted in Skipped. Rejected and unknown
// writes are not looked at: the model is about what the storage accepted.
//
// Writes with Seq 0 tokens (an unfenced lock) have no tokens to compare, so
// holders are ranked by their first accepted write to any resource the
// lock guards (grouped by Token.Key): a write from a holder after a later
// holder's writes began (A, B, A) is an interleaved anomaly. Which of the two
// is stale the history cannot tell; that they overlapped it can. This needs
// [Op.Holder] to name one acquisition, and commit sequences drawn from one
// storage-wide sequence after the write's row lock is taken, so that they
// order writes across resources; with a working lock every holder's writes
// commit before the next holder's start, so this stand-in has no false
// positives, but it sees only stale writes from holders that wrote before.
func CheckFencedMutex(h History) Result {
	res := Result{Checker: CheckerFencedMutex}
	byRes := map[string][]*Op{}  // fenced writes by resource
	byLock := map[string][]*Op{} // unfenced writes by lock key
	for i := range h.Ops {
		op := &h.Ops[i]
		if !op.Kind.IsWrite() || op.Outcome != Ok {
			continue
		}
		if op.Commit == 0 {
			res.Skipped++
			continue
		}
		res.Checked++
		if op.Token.Fenced() {
			byRes[op.Resource] = append(byRes[op.Resource], op)
		} else {
			byLock[op.Token.Key] = append(byLock[op.Token.Key], op)
		}
	}
	if res.Skipped > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d acknowledged %s without a commit sequence, not ordered",
			res.Skipped, plural(res.Skipped, "write", "writes")))
	}
	for _, r := range sortedKeys(byRes) {
		res.Anomalies = append(res.Anomalies, fencedTokens(r, byCommit(byRes[r]))...)
	}
	for _, k := range sortedKeys(byLock) {
		res.Anomalies = append(res.Anomalies, fencedHolders(byCommit(byLock[k]))...)
	}
	return res
}

func byCommit(ops []*Op) []*Op {
	slices.SortStableFunc(ops, func(a, b *Op) int {
		return cmp.Or(cmp.Compare(a.Commit, b.Commit), cmp.Compare(a.ID, b.ID))
	})
	return ops
}

// fencedTokens applies the token rule to one resource's accepted writes in
// commit order, against the high-water mark.
func fencedTokens(resource string, ops []*Op) []Anomaly {
	var out []Anomaly
	var high *Op
	for _, op := range ops {
		if high == nil {
			high = op
			continue
		}
		tok, hw := op.Token, high.Token
		if tok.Supersedes(hw) {
			high = op
			continue
		}
		a := Anomaly{Checker: CheckerFencedMutex, Resource: resource, Ops: []int{high.ID, op.ID}, Count: 1}
		if tok.Seq == hw.Seq {
			a.Kind = AnomalyConflict
			a.Detail = fmt.Sprintf("write #%d with token %s accepted after #%d with the same Seq from holder %s",
				op.ID, tok, high.ID, hw.Holder)
		} else {
			a.Kind = AnomalyStaleToken
			a.Detail = fmt.Sprintf("write #%d with token %s accepted after #%d with newer token %s",
				op.ID, tok, high.ID, hw)
		}
		out = append(out, a)
	}
	return out
}

// fencedHolders is the unfenced stand-in over one lock's writes: holders
// ranked by first accepted write; a write from a lower-ranked holder after a
// higher one is stale.
func fencedHolders(ops []*Op) []Anomaly {
	var out []Anomaly
	rank := map[string]int{}
	var high *Op
	for _, op := range ops {
		holder := op.HolderID()
		rk, seen := rank[holder]
		if !seen {
			rk = len(rank)
			rank[holder] = rk
		}
		if high == nil || rk >= rank[high.HolderID()] {
			high = op
			continue
		}
		out = append(out, Anomaly{
			Checker: CheckerFencedMutex, Kind: AnomalyInterleaved, Resource: op.Resource,
			Ops: []int{high.ID, op.ID}, Count: 1,
			Detail: fmt.Sprintf("write #%d by holder %s accepted after #%d (%s) by holder %s, whose writes began after %s's: their tenures overlap",
				op.ID, short(holder), high.ID, high.Resource, short(high.HolderID()), short(holder)),
		})
	}
	return out
}

// short abbreviates a long holder id (a UUID) to its first 8 characters.
func short(s string) string {
	if len(s) > 16 {
		return s[:8] + "…"
	}
	if s == "" {
		return `""`
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
