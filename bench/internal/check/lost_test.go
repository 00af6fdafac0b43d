package check

import (
	"slices"
	"testing"
)

func TestLostUpdatesClean(t *testing.T) {
	h, final := cleanHistory()
	r := CheckLostUpdates(h, final, nil)
	wantNoAnomalies(t, r)
	if r.Checked != 11 || r.Skipped != 0 {
		t.Fatalf("checked %d skipped %d, want 11 and 0", r.Checked, r.Skipped)
	}
	// the unknown increment may also have landed
	final.Registers["ctr"] = 5
	wantNoAnomalies(t, CheckLostUpdates(h, final, nil))
}

func TestLostUpdatesDuplicateIncrement(t *testing.T) {
	// two holders both read 1 and wrote 2: one increment lost.
	var b builder
	b.incr(0, "ctr", 1, 0, 1, tok(1, "a"), 1)
	x := b.incr(1, "ctr", 2, 2, 5, Token{}, 2)
	y := b.incr(2, "ctr", 2, 3, 6, Token{}, 3)
	b.incr(1, "ctr", 3, 7, 8, Token{}, 4)
	a := wantOneAnomaly(t, CheckLostUpdates(b.history(), Final{Registers: map[string]int64{"ctr": 3}}, nil),
		AnomalyDuplicateIncr, x, y)
	if a.Count != 1 {
		t.Fatalf("count %d", a.Count)
	}
}

func TestLostUpdatesRolledBack(t *testing.T) {
	var b builder
	b.incr(0, "ctr", 1, 0, 1, Token{}, 1)
	b.incr(0, "ctr", 2, 2, 3, Token{}, 2)
	third := b.incr(0, "ctr", 3, 4, 5, Token{}, 3)
	// a stale holder then wrote 2 back: the final counter is 2
	wantOneAnomaly(t, CheckLostUpdates(b.history(), Final{Registers: map[string]int64{"ctr": 2}}, nil),
		AnomalyRolledBack, third)
}

func TestLostUpdatesShortCounter(t *testing.T) {
	// no op-level clue (the values are distinct and within the final) but
	// the counter grew less than the acknowledged increments: reported as a
	// count.
	var b builder
	b.incr(0, "ctr", 11, 0, 1, Token{}, 1)
	b.incr(0, "ctr", 12, 2, 3, Token{}, 2)
	b.incr(0, "ctr", 13, 4, 5, Token{}, 3)
	init := map[string]int64{"ctr": 10}
	wantNoAnomalies(t, CheckLostUpdates(b.history(), Final{Registers: map[string]int64{"ctr": 13}}, init))
	a := wantOneAnomaly(t, CheckLostUpdates(b.history(), Final{Registers: map[string]int64{"ctr": 13}}, map[string]int64{"ctr": 11}),
		AnomalyLostIncr)
	if a.Count != 1 {
		t.Fatalf("count %d: %s", a.Count, a.Detail)
	}
}

func TestLostUpdatesExtraIncrements(t *testing.T) {
	var b builder
	b.incr(0, "ctr", 1, 0, 1, Token{}, 1)
	b.add(Op{Kind: KindIncr, Resource: "ctr", Value: 2, Outcome: Fail, Rejected: true})
	a := wantOneAnomaly(t, CheckLostUpdates(b.history(), Final{Registers: map[string]int64{"ctr": 2}}, nil), AnomalyExtraIncr)
	if a.Count != 1 {
		t.Fatalf("count %d", a.Count)
	}
}

func TestLostUpdatesLostAppend(t *testing.T) {
	h, final := cleanHistory()
	final.Sets["set"] = []int64{100, 102, 103} // 101 was acknowledged
	lost := slices.IndexFunc(h.Ops, func(op Op) bool { return op.Kind == KindAppend && op.Value == 101 })
	a := wantOneAnomaly(t, CheckLostUpdates(h, final, nil), AnomalyLostAppend, lost)
	if a.Resource != "set" {
		t.Fatalf("resource %q", a.Resource)
	}
}

func TestLostUpdatesUnknownAppendMayBeAbsent(t *testing.T) {
	h, final := cleanHistory()
	final.Sets["set"] = []int64{100, 101, 103} // 102 was unknown
	wantNoAnomalies(t, CheckLostUpdates(h, final, nil))
}

func TestLostUpdatesPhantomAppend(t *testing.T) {
	h, final := cleanHistory()
	final.Sets["set"] = append(final.Sets["set"], 104) // its append failed
	failed := slices.IndexFunc(h.Ops, func(op Op) bool { return op.Value == 104 })
	wantOneAnomaly(t, CheckLostUpdates(h, final, nil), AnomalyPhantom, failed)
}

func TestLostUpdatesMissingFinal(t *testing.T) {
	h, _ := cleanHistory()
	r := CheckLostUpdates(h, Final{}, nil)
	wantNoAnomalies(t, r)
	if r.Skipped != 11 || len(r.Notes) != 2 {
		t.Fatalf("skipped %d notes %q", r.Skipped, r.Notes)
	}
}
