package check

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLinearizableClean(t *testing.T) {
	h, _ := cleanHistory()
	r := CheckLinearizable(h, LinearOptions{})
	wantNoAnomalies(t, r)
	// register ops on ctr: 4 acked incrs, 1 unknown incr, 4 reads (the
	// rejected incr is left out, the set is not a register)
	if r.Checked != 9 || r.Skipped != 0 {
		t.Fatalf("checked %d skipped %d, want 9 and 0", r.Checked, r.Skipped)
	}
}

func TestLinearizableStaleRead(t *testing.T) {
	var b builder
	b.incr(0, "ctr", 1, 0, 2, tok(1, "a"), 1)
	b.incr(0, "ctr", 2, 3, 5, tok(2, "b"), 2)
	stale := b.read(1, "ctr", 1, 6, 7) // invoked after 2 was acknowledged
	r := CheckLinearizable(b.history(), LinearOptions{})
	a := wantOneAnomaly(t, r, AnomalyNotLinearizable)
	if !slices.Contains(a.Ops, stale) || a.Resource != "ctr" {
		t.Fatalf("anomaly %+v should name the stale read #%d", a, stale)
	}
}

func TestLinearizableConcurrentReadMaySeeEither(t *testing.T) {
	for _, v := range []int64{1, 2} {
		var b builder
		b.incr(0, "ctr", 1, 0, 2, tok(1, "a"), 1)
		b.incr(0, "ctr", 2, 3, 6, tok(2, "b"), 2)
		b.read(1, "ctr", v, 4, 5)
		wantNoAnomalies(t, CheckLinearizable(b.history(), LinearOptions{}))
	}
}

func TestLinearizableLostIncrement(t *testing.T) {
	// two overlapping acknowledged incrs both read 0 and wrote 1: as atomic
	// read-modify-writes, no order explains that.
	var b builder
	b.incr(0, "ctr", 1, 0, 5, Token{Holder: "a"}, 1)
	b.incr(1, "ctr", 1, 1, 6, Token{Holder: "b"}, 2)
	wantOneAnomaly(t, CheckLinearizable(b.history(), LinearOptions{}), AnomalyNotLinearizable)
}

func TestLinearizableInitialValue(t *testing.T) {
	var b builder
	b.read(0, "ctr", 7, 0, 1)
	b.incr(0, "ctr", 8, 2, 3, tok(1, "a"), 1)
	wantOneAnomaly(t, CheckLinearizable(b.history(), LinearOptions{}), AnomalyNotLinearizable)
	wantNoAnomalies(t, CheckLinearizable(b.history(), LinearOptions{Init: map[string]int64{"ctr": 7}}))
}

// An op whose outcome is unknown may take effect at any time after its
// invocation, even after the client gave up: a read invoked after the
// unknown incr's End still may see its value. Modelling its return as its
// End (instead of +infinity) would wrongly flag this history.
func TestLinearizableUnknownTakesEffectLate(t *testing.T) {
	var b builder
	b.incr(0, "ctr", 1, 0, 2, tok(1, "a"), 1)
	b.add(Op{Client: 1, Kind: KindIncr, Resource: "ctr", Value: 2, Start: ms(3), End: ms(4), Token: tok(2, "b"), Outcome: Unknown})
	b.read(2, "ctr", 1, 5, 6) // not yet
	b.read(2, "ctr", 2, 7, 8) // now it landed
	h := b.history()
	wantNoAnomalies(t, CheckLinearizable(h, LinearOptions{}))

	// the same op, acknowledged, makes the first read stale
	h.Ops[1].Outcome = Ok
	wantOneAnomaly(t, CheckLinearizable(h, LinearOptions{}), AnomalyNotLinearizable)
}

func TestLinearizableUnknownNeverLands(t *testing.T) {
	var b builder
	b.incr(0, "ctr", 1, 0, 2, tok(1, "a"), 1)
	b.add(Op{Client: 1, Kind: KindIncr, Resource: "ctr", Start: ms(3), End: ms(4), Outcome: Unknown}) // value unknown
	b.add(Op{Client: 1, Kind: KindWrite, Resource: "ctr", Value: 9, Start: ms(3), End: ms(4), Outcome: Unknown})
	b.read(2, "ctr", 1, 5, 6)
	b.add(Op{Client: 2, Kind: KindRead, Resource: "ctr", Value: 42, Start: ms(7), End: ms(8), Outcome: Unknown}) // ignored
	wantNoAnomalies(t, CheckLinearizable(b.history(), LinearOptions{}))
}

func TestLinearizableFailedOpsHaveNoEffect(t *testing.T) {
	var b builder
	b.incr(0, "ctr", 1, 0, 2, tok(1, "a"), 1)
	b.add(Op{Client: 1, Kind: KindWrite, Resource: "ctr", Value: 5, Start: ms(3), End: ms(4), Outcome: Fail})
	read := b.read(2, "ctr", 5, 5, 6)
	h := b.history()
	wantOneAnomaly(t, CheckLinearizable(h, LinearOptions{}), AnomalyNotLinearizable, read)
	h.Ops[1].Outcome = Ok
	wantNoAnomalies(t, CheckLinearizable(h, LinearOptions{}))
}

func TestLinearizablePartitionsByResource(t *testing.T) {
	var b builder
	b.incr(0, "x", 1, 0, 1, tok(1, "a"), 1)
	b.incr(0, "y", 1, 2, 3, tok(1, "a"), 2) // another register starts at 0 too
	b.read(1, "x", 1, 4, 5)
	bad := b.read(1, "y", 0, 6, 7)
	a := wantOneAnomaly(t, CheckLinearizable(b.history(), LinearOptions{}), AnomalyNotLinearizable, bad)
	if a.Resource != "y" {
		t.Fatalf("resource %q", a.Resource)
	}
}

func TestLinearizableVisualization(t *testing.T) {
	dir := t.TempDir()
	var b builder
	b.incr(0, "ctr/main", 1, 0, 2, tok(1, "a"), 1)
	b.read(1, "ctr/main", 0, 3, 4)
	r := CheckLinearizable(b.history(), LinearOptions{VisualizeDir: dir})
	wantOneAnomaly(t, r, AnomalyNotLinearizable)
	want := filepath.Join(dir, "linearizability-ctr_main.html")
	if !slices.Equal(r.Files, []string{want}) {
		t.Fatalf("files %v, want %v", r.Files, []string{want})
	}
	data, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "read() → 0") {
		t.Fatalf("visualization lacks the described op (%d bytes)", len(data))
	}
}
