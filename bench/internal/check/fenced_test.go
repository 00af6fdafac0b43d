package check

import (
	"strings"
	"testing"
)

func TestFencedMutexClean(t *testing.T) {
	h, _ := cleanHistory()
	r := CheckFencedMutex(h)
	wantNoAnomalies(t, r)
	// 7 acknowledged writes, one of them (the unknown append) not counted,
	// none without commit order
	if r.Checked != 7 || r.Skipped != 0 {
		t.Fatalf("checked %d skipped %d, want 7 and 0", r.Checked, r.Skipped)
	}
}

func TestFencedMutexStaleWriteAccepted(t *testing.T) {
	var b builder
	b.incr(0, "ctr", 1, 0, 2, tok(1, "a"), 1)
	newer := b.incr(1, "ctr", 2, 3, 5, tok(3, "c"), 2)
	stale := b.incr(0, "ctr", 3, 1, 9, tok(2, "b"), 3) // invoked early, committed late
	b.incr(1, "ctr", 4, 10, 12, tok(4, "d"), 4)
	a := wantOneAnomaly(t, CheckFencedMutex(b.history()), AnomalyStaleToken, newer, stale)
	if a.Resource != "ctr" || !strings.Contains(a.Detail, "#2") {
		t.Fatalf("anomaly %+v", a)
	}
}

func TestFencedMutexComparesWithHighWater(t *testing.T) {
	// 5 accepted, then 3 (stale), then 4: 4 is stale too, against 5.
	var b builder
	b.incr(0, "r", 1, 0, 1, tok(5, "e"), 1)
	b.incr(0, "r", 2, 2, 3, tok(3, "c"), 2)
	b.incr(0, "r", 3, 4, 5, tok(4, "d"), 3)
	r := CheckFencedMutex(b.history())
	if got := anomalyKinds(r); len(got) != 2 {
		t.Fatalf("want 2 stale-token anomalies, got %v", got)
	}
	if r.Anomalies[1].Ops[0] != 0 {
		t.Fatalf("second anomaly should cite the high-water write #0: %+v", r.Anomalies[1])
	}
}

func TestFencedMutexUsesCommitOrderNotIDs(t *testing.T) {
	// invoked in token order, committed in token order, but ids reversed:
	// commit order decides, so no anomaly.
	var b builder
	b.incr(1, "r", 2, 5, 6, tok(2, "b"), 20)
	b.incr(0, "r", 1, 0, 1, tok(1, "a"), 10)
	wantNoAnomalies(t, CheckFencedMutex(b.history()))
}

func TestFencedMutexConflict(t *testing.T) {
	var b builder
	first := b.incr(0, "r", 1, 0, 1, tok(7, "a"), 1)
	b.incr(0, "r", 2, 1, 2, tok(7, "a"), 2) // same holder again: fine
	second := b.appendOp(1, "r", 9, 3, 4, tok(7, "z"), 3, Ok)
	wantOneAnomaly(t, CheckFencedMutex(b.history()), AnomalyConflict, first+1, second)
}

func TestFencedMutexPerResource(t *testing.T) {
	var b builder
	b.incr(0, "x", 1, 0, 1, tok(5, "e"), 1)
	b.incr(0, "y", 1, 2, 3, tok(3, "c"), 2) // lower Seq on another resource: fine
	wantNoAnomalies(t, CheckFencedMutex(b.history()))
}

func TestFencedMutexIgnoresRejectedAndSkipsUnordered(t *testing.T) {
	var b builder
	b.incr(0, "r", 1, 0, 1, tok(5, "e"), 1)
	b.add(Op{Kind: KindIncr, Resource: "r", Value: 2, Token: tok(3, "c"), Outcome: Fail, Rejected: true})
	b.add(Op{Kind: KindIncr, Resource: "r", Value: 2, Token: tok(4, "d"), Outcome: Unknown})
	b.incr(0, "r", 2, 2, 3, tok(2, "b"), 0) // stale, but no commit order: skipped, noted
	r := CheckFencedMutex(b.history())
	wantNoAnomalies(t, r)
	if r.Skipped != 1 || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 acknowledged write ") {
		t.Fatalf("skipped %d notes %q", r.Skipped, r.Notes)
	}
}

func TestFencedMutexUnfencedHolders(t *testing.T) {
	unfenced := func(holder string) Token { return Token{Holder: holder} }
	var b builder
	b.appendOp(0, "set", 1, 0, 1, unfenced("A"), 1, Ok)
	b.appendOp(1, "set", 2, 2, 3, unfenced("B"), 2, Ok)
	b.appendOp(1, "set", 3, 3, 4, unfenced("B"), 3, Ok)
	clean := b.history()
	wantNoAnomalies(t, CheckFencedMutex(clean))

	stale := b.appendOp(0, "set", 4, 1, 6, unfenced("A"), 4, Ok) // A again, after B
	b.appendOp(2, "set", 5, 7, 8, unfenced("C"), 5, Ok)
	a := wantOneAnomaly(t, CheckFencedMutex(b.history()), AnomalyInterleaved, 2, stale)
	if !strings.Contains(a.Detail, "holder A") {
		t.Fatalf("detail %q", a.Detail)
	}
}

func TestFencedMutexUnfencedAcrossResources(t *testing.T) {
	// one lock guards both resources: A writes the set, B takes over and
	// writes both, then A's delayed counter write lands.
	lock := func(holder string) Token { return Token{Key: "lock", Holder: holder} }
	var b builder
	b.appendOp(0, "set", 1, 0, 1, lock("A"), 1, Ok)
	b.appendOp(1, "set", 2, 2, 3, lock("B"), 2, Ok)
	newer := b.incr(1, "ctr", 1, 3, 4, lock("B"), 3)
	stale := b.incr(0, "ctr", 1, 1, 6, lock("A"), 4)
	b.incr(0, "other", 1, 7, 8, Token{Key: "other-lock", Holder: "A"}, 5) // another lock: not compared
	a := wantOneAnomaly(t, CheckFencedMutex(b.history()), AnomalyInterleaved, newer, stale)
	if a.Resource != "ctr" {
		t.Fatalf("resource %q", a.Resource)
	}
}
