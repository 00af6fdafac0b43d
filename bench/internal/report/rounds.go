package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Figures is one figure per round; NaN is a round with no figure (null
// in JSON).
type Figures []float64

// MarshalJSON writes NaN as null.
func (f Figures) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range f {
		if i > 0 {
			b.WriteByte(',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b.WriteString("null")
			continue
		}
		b.WriteString(strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64))
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// UnmarshalJSON reads null as NaN.
func (f *Figures) UnmarshalJSON(b []byte) error {
	var ps []*float64
	if err := json.Unmarshal(b, &ps); err != nil {
		return err
	}
	*f = make(Figures, len(ps))
	for i, p := range ps {
		(*f)[i] = math.NaN()
		if p != nil {
			(*f)[i] = *p
		}
	}
	return nil
}

// Paired is the median over the rounds of a's figure divided by b's, over
// the rounds where both have one and b's is above 0, and how many rounds
// that was. The ratio is nil when most rounds had to be dropped (a ratio
// of the few left would stand for the run), or none is left. a and b must
// come from the same interleaved run: round i of each was measured moments
// apart, so a noisy neighbour weighs on both.
func Paired(a, b *Result) (ratio *float64, pairs int) {
	if a == nil || b == nil {
		return nil, 0
	}
	n := min(len(a.PerRound), len(b.PerRound))
	var rs []float64
	for i := range n {
		x, y := a.PerRound[i], b.PerRound[i]
		if !math.IsNaN(x) && !math.IsNaN(y) && !math.IsInf(x, 0) && y > 0 && !math.IsInf(y, 0) {
			rs = append(rs, x/y)
		}
	}
	if len(rs) == 0 || 2*len(rs) < n {
		return nil, len(rs)
	}
	return Ptr(Median(rs)), len(rs)
}

// PairedRatio is Paired without the count of pairs.
func PairedRatio(a, b *Result) *float64 {
	r, _ := Paired(a, b)
	return r
}

// Ratio is a's figure (fig) over b's: the median of the paired ratios
// when both ran interleaved and most rounds paired (pairs > 0: how many),
// else the ratio of the whole figures (pairs 0, as for a run recorded
// without rounds); nil when there is neither.
func Ratio(a, b *Result, fig func(*Result) *float64) (r *float64, pairs int) {
	if p, n := Paired(a, b); p != nil {
		return p, n
	}
	x, y := Field(a, fig), Field(b, fig)
	if x == nil || y == nil || *y <= 0 || math.IsInf(*x, 0) || math.IsInf(*y, 0) {
		return nil, 0
	}
	return Ptr(*x / *y), 0
}

// Spread is how a figure varied over the rounds.
type Spread struct {
	Rounds                   int // with a figure
	Min, Q1, Median, Q3, Max float64
}

// SpreadOf is the spread of r's figures over the rounds; ok is false when
// no round has one.
func SpreadOf(r *Result) (s Spread, ok bool) {
	if r == nil {
		return s, false
	}
	var v []float64
	for _, x := range r.PerRound {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return s, false
	}
	slices.Sort(v)
	return Spread{Rounds: len(v), Min: v[0], Q1: quantile(v, 0.25), Median: quantile(v, 0.5), Q3: quantile(v, 0.75), Max: v[len(v)-1]}, true
}

// IQR is the interquartile range as a fraction of the median (0 when the
// median is 0).
func (s Spread) IQR() float64 {
	if s.Median == 0 {
		return 0
	}
	return (s.Q3 - s.Q1) / s.Median
}

// Text is "min–max unit (IQR n%)" with format for the figures.
func (s Spread) Text(format, unit string) string {
	if unit != "" {
		unit = " " + unit
	}
	return fmt.Sprintf(format+"–"+format+"%s (IQR %.0f%%)", s.Min, s.Max, unit, 100*s.IQR())
}

// Median is the median of v (NaN when v is empty).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return quantile(s, 0.5)
}

// quantile interpolates linearly in sorted s.
func quantile(s []float64, q float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}
