package report

import (
	"encoding/json"
	"math"
	"testing"
)

// TestFiguresJSON: a round with no figure is null in JSON and NaN again
// when read back.
func TestFiguresJSON(t *testing.T) {
	b, err := json.Marshal(Result{Lock: "raw", PerRound: Figures{142.34, math.NaN(), 31269}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.PerRound) != 3 || r.PerRound[0] != 142.3 || !math.IsNaN(r.PerRound[1]) || r.PerRound[2] != 31269 {
		t.Errorf("%s read back as %v", b, r.PerRound)
	}
}

// TestPaired: the median of the ratios of the rounds where both have a
// figure and the denominator is above 0; nil without any.
func TestPaired(t *testing.T) {
	a := &Result{PerRound: Figures{0, 20, 30, 40, math.NaN()}}
	b := &Result{PerRound: Figures{10, 10, 0, 10, 10}}
	// rounds 0, 1, 3: 0, 2, 4 → 2.
	if p := Paired(a, b); p == nil || *p != 2 {
		t.Errorf("Paired = %v, want 2", p)
	}
	if p := Paired(a, &Result{}); p != nil {
		t.Errorf("Paired without rounds = %v, want nil", *p)
	}
	s, ok := SpreadOf(a)
	if !ok || s.Rounds != 4 || s.Min != 0 || s.Max != 40 || s.Median != 25 {
		t.Errorf("SpreadOf = %+v", s)
	}
}
