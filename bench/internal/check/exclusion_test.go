package check

import (
	"slices"
	"strings"
	"testing"
)

// leases builds hand-made lease histories; ids are indices.
type leases struct{ h History }

// add records a lease of client on lock "L" with token seq/holder, from
// start to deadline (ms), released at rel (0: never).
func (b *leases) add(client int, seq uint64, holder string, start, deadline, rel int) int {
	id := len(b.h.Leases)
	b.h.Leases = append(b.h.Leases, Lease{ID: id, Client: client, Lock: "L", Holder: holder,
		Token: Token{Key: "L", Seq: seq, Holder: holder}, Start: ms(start), Deadline: ms(deadline), Released: ms(rel), Held: true})
	return id
}

func TestExclusionOverlapFound(t *testing.T) {
	var b leases
	b.add(0, 1, "a", 0, 100, 40)      // released before b: fine
	a := b.add(1, 2, "b", 50, 150, 0) // never released: its window runs to its deadline
	c := b.add(2, 3, "c", 120, 220, 200)
	b.h.Ops = []Op{
		{ID: 0, Client: 1, Holder: "b", Kind: KindIncr, Resource: "r", Start: ms(60), End: ms(70), Outcome: Ok},
		{ID: 1, Client: 2, Holder: "c", Kind: KindIncr, Resource: "r", Start: ms(130), End: ms(140), Outcome: Ok},
		{ID: 2, Client: 0, Holder: "a", Kind: KindIncr, Resource: "r", Start: ms(10), End: ms(20), Outcome: Ok},
	}
	r := CheckExclusion(b.h, nil)
	an := wantOneAnomaly(t, r, AnomalyOverlap)
	if !slices.Equal(an.Leases, []int{a, c}) || !slices.Equal(an.Ops, []int{0, 1}) || an.Resource != "L" {
		t.Fatalf("anomaly %+v: want leases [%d %d], ops [0 1]", an, a, c)
	}
	if !strings.Contains(an.Detail, "by 30ms") || !strings.Contains(an.Detail, "token 3/c") {
		t.Fatalf("detail %q", an.Detail)
	}
	if r.Checked != 3 {
		t.Fatalf("checked %d, want 3", r.Checked)
	}
}

func TestExclusionTouchingWindows(t *testing.T) {
	var b leases
	b.add(0, 1, "a", 0, 100, 0)     // to its deadline, 100
	b.add(1, 2, "b", 100, 200, 150) // starts when a's deadline passes
	b.add(2, 3, "c", 150, 250, 0)   // starts when b's release was called
	wantNoAnomalies(t, CheckExclusion(b.h, nil))
}

func TestExclusionNotJudged(t *testing.T) {
	var b leases
	b.add(0, 1, "a", 0, 100, 0)
	b.add(0, 1, "a", 20, 120, 0) // the same holder again (a re-acquire)
	b.add(1, 0, "x", 30, 0, 90)  // a lock without a local deadline: not judged
	b.add(2, 2, "b", 40, 30, 0)  // its deadline had passed when Acquire returned: no window
	other := b.add(3, 1, "z", 50, 150, 0)
	b.h.Leases[other].Lock = "M" // another lock
	// A holder paused after its Acquire returned calls Release late: its
	// window still ends at its deadline, so the next holder's is apart.
	b.add(4, 5, "p", 200, 300, 900)
	b.add(5, 6, "q", 310, 400, 0)
	r := CheckExclusion(b.h, nil)
	wantNoAnomalies(t, r)
	if r.Checked != 6 { // all but the one without a deadline
		t.Fatalf("checked %d, want 6", r.Checked)
	}
}

func TestExclusionExplainedByDataLoss(t *testing.T) {
	var b leases
	b.add(0, 7, "a", 0, 100, 0)
	b.add(1, 3, "b", 50, 150, 0) // the counter went back too
	for _, f := range []Fault{FaultRestartRedis, FaultFailover, FaultEvict, FaultEarlyExpiry} {
		r := CheckExclusion(b.h, []Window{{Start: ms(20), Duration: ms(10), Fault: f}})
		wantNoAnomalies(t, r)
		if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 overlap explained") || !strings.Contains(r.Notes[0], string(f)) {
			t.Fatalf("%s: notes %q", f, r.Notes)
		}
	}
	// Faults that lose nothing, or a loss that came after the second
	// holder had started or before the first one started, explain nothing.
	for _, w := range []Window{
		{Start: ms(20), Duration: ms(10), Fault: FaultPauseRedis},
		{Start: ms(20), Duration: ms(10), Fault: FaultPauseHolder},
		{Start: ms(20), Duration: ms(10), Fault: FaultPauseWaiter},
		{Start: ms(60), Duration: ms(10), Fault: FaultRestartRedis},
	} {
		wantOneAnomaly(t, CheckExclusion(b.h, []Window{w}), AnomalyOverlap)
	}
	var c leases
	c.add(0, 7, "a", 40, 140, 0)
	c.add(1, 8, "b", 50, 150, 0)
	wantOneAnomaly(t, CheckExclusion(c.h, []Window{{Start: ms(10), Duration: ms(20), Fault: FaultEvict}}), AnomalyOverlap)
}
