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
// figure and the denominator is above 0, with how many there were; nil
// when most rounds were dropped, or none is left.
func TestPaired(t *testing.T) {
	a := &Result{PerRound: Figures{0, 20, 30, 40, math.NaN()}}
	b := &Result{PerRound: Figures{10, 10, 0, 10, 10}}
	// rounds 0, 1, 3: 0, 2, 4 → 2, 3 pairs of 5 rounds.
	if p, n := Paired(a, b); p == nil || *p != 2 || n != 3 {
		t.Errorf("Paired = %v, %d, want 2, 3", p, n)
	}
	if p, n := Paired(a, &Result{}); p != nil || n != 0 {
		t.Errorf("Paired without rounds = %v, %d, want nil, 0", p, n)
	}
	// A peer whose wake came before the release in most rounds: one
	// pair of 4 does not stand for the run.
	lease := &Result{PerRound: Figures{100, 100, 100, 100}}
	if p, n := Paired(lease, &Result{PerRound: Figures{0, 900, 0, 0}}); p != nil || n != 1 {
		t.Errorf("Paired with 1 of 4 rounds = %v, %d, want nil, 1", p, n)
	}
	if p, n := Paired(lease, &Result{PerRound: Figures{0, 0, 0, 0}}); p != nil || n != 0 {
		t.Errorf("Paired with a peer at 0 = %v, %d, want nil, 0", p, n)
	}
	// Half the rounds is not most: 2 of 4 pairs stand.
	if p, n := Paired(lease, &Result{PerRound: Figures{0, 200, 0, 400}}); p == nil || *p != 0.375 || n != 2 {
		t.Errorf("Paired with 2 of 4 rounds = %v, %d, want 0.375, 2", p, n)
	}
	s, ok := SpreadOf(a)
	if !ok || s.Rounds != 4 || s.Min != 0 || s.Max != 40 || s.Median != 25 {
		t.Errorf("SpreadOf = %+v", s)
	}
}
