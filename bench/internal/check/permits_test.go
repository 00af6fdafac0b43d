package check

import (
	"strings"
	"testing"
)

// permit is the token of holder on slot of semaphore "sem" (Seq 0: the
// unguarded workload's; the checker reads only the key and the holder).
func permit(slot int, holder string) Token {
	return Token{Key: "sem#" + string(rune('0'+slot)), Holder: holder}
}

// TestPermitsAtMostN: two permits, holders a and b write at once, then c
// after a's last write: never more than two tenures open.
func TestPermitsAtMostN(t *testing.T) {
	var b builder
	b.appendOp(0, "s0", 1, 0, 1, permit(0, "a"), 1, Ok)
	b.appendOp(1, "s1", 2, 0, 1, permit(1, "b"), 2, Ok)
	b.appendOp(0, "s0", 3, 1, 2, permit(0, "a"), 3, Ok)
	b.appendOp(2, "s0", 4, 2, 3, permit(0, "c"), 4, Ok) // a's last was #3: c starts after it
	b.appendOp(1, "s1", 5, 2, 3, permit(1, "b"), 5, Ok)
	b.appendOp(2, "s0", 6, 3, 4, permit(0, "c"), 6, Ok)
	r := CheckPermits(b.history(), 2)
	wantNoAnomalies(t, r)
	if r.Checked != 6 {
		t.Fatalf("checked %d, want 6", r.Checked)
	}
}

// TestPermitsOverN: a third holder's first write lands between the first
// and last writes of two others, with two permits.
func TestPermitsOverN(t *testing.T) {
	var b builder
	b.appendOp(0, "s0", 1, 0, 1, permit(0, "a"), 1, Ok)
	b.appendOp(1, "s1", 2, 0, 1, permit(1, "b"), 2, Ok)
	b.appendOp(2, "s0", 3, 1, 2, permit(0, "c"), 3, Ok) // slot 0 handed on while a still writes
	b.appendOp(0, "s0", 4, 2, 3, permit(0, "a"), 4, Ok)
	b.appendOp(1, "s1", 5, 2, 3, permit(1, "b"), 5, Ok)
	b.appendOp(2, "s0", 6, 3, 4, permit(0, "c"), 6, Ok)
	a := wantOneAnomaly(t, CheckPermits(b.history(), 2), AnomalyOverPermits, 0, 1, 2, 3, 4, 5)
	if a.Resource != "sem" || !strings.Contains(a.Detail, "up to 3 holders at once") || !strings.Contains(a.Detail, "2 permits") {
		t.Fatalf("anomaly %+v", a)
	}
	// With three permits, the same history is within the bound.
	wantNoAnomalies(t, CheckPermits(b.history(), 3))
}

// TestPermitsOnlyAccepted: rejected, failed and unknown writes, writes of
// plain locks and writes without a commit order are not tenures.
func TestPermitsOnlyAccepted(t *testing.T) {
	var b builder
	b.appendOp(0, "s0", 1, 0, 1, permit(0, "a"), 1, Ok)
	b.add(Op{Client: 1, Kind: KindAppend, Resource: "s0", Value: 2, Token: permit(0, "b"), Outcome: Fail, Rejected: true})
	b.appendOp(2, "s0", 3, 1, 2, permit(0, "c"), 0, Unknown)
	b.appendOp(3, "s1", 4, 1, 2, tok(9, "lock-holder"), 3, Ok) // a lock's write: not the semaphore's
	b.appendOp(1, "s0", 5, 2, 3, permit(0, "b"), 0, Ok)        // no commit sequence: skipped
	b.appendOp(0, "s0", 6, 3, 4, permit(0, "a"), 4, Ok)
	r := CheckPermits(b.history(), 1)
	wantNoAnomalies(t, r)
	if r.Checked != 2 || r.Skipped != 1 {
		t.Fatalf("checked %d, skipped %d; want 2 and 1", r.Checked, r.Skipped)
	}
}

// TestPermitsOneEpisode: a holder paused between two writes while its slot
// went to three holders in turn (one permit) is one stretch with too many,
// however many began meanwhile; a later, separate one is another.
func TestPermitsOneEpisode(t *testing.T) {
	var b builder
	b.appendOp(0, "s0", 1, 0, 1, permit(0, "a"), 1, Ok)
	commit := uint64(2)
	for _, h := range []string{"b", "c", "d"} {
		for range 2 {
			b.appendOp(1, "s0", int64(commit), 1, 2, permit(0, h), commit, Ok)
			commit++
		}
	}
	b.appendOp(0, "s0", 99, 2, 3, permit(0, "a"), commit, Ok) // a wakes and writes on
	commit++
	b.appendOp(2, "s0", 100, 3, 4, permit(0, "e"), commit, Ok)
	b.appendOp(3, "s0", 101, 3, 4, permit(0, "f"), commit+1, Ok)
	b.appendOp(2, "s0", 102, 3, 4, permit(0, "e"), commit+2, Ok)
	b.appendOp(3, "s0", 103, 3, 4, permit(0, "f"), commit+3, Ok)
	r := CheckPermits(b.history(), 1)
	if got := anomalyKinds(r); len(got) != 2 {
		t.Fatalf("want 2 over-permits stretches, got %d: %+v", len(got), r.Anomalies)
	}
	if !strings.Contains(r.Anomalies[0].Detail, "up to 2 holders") || !strings.Contains(r.Anomalies[0].Detail, "d on sem#0") {
		t.Fatalf("first stretch: %s", r.Anomalies[0].Detail)
	}
}
