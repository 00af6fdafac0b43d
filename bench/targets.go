package main

import "fmt"

// Target is one of the performance targets, checked on one run.
type Target struct {
	Name     string   `json:"name"`
	Ratio    *float64 `json:"ratio,omitempty"` // the measured ratio (or value) compared with Limit
	Limit    float64  `json:"limit"`
	Measured string   `json:"measured"`
	Met      *bool    `json:"met,omitempty"` // nil when a figure is missing
}

func (t Target) verdict() string {
	switch {
	case t.Met == nil:
		return "n/a"
	case *t.Met:
		return "met"
	}
	return "MISSED"
}

// targets checks the targets against rs.
func targets(rs []Result) []Target {
	get := func(lock, scen string, f func(*Result) *float64) *float64 {
		return field(find(rs, lock, scen), f)
	}
	p50 := func(r *Result) *float64 { return r.P50us }
	ops := func(r *Result) *float64 { return r.OpsPerSec }

	var out []Target
	// ratio adds the target num/den <= limit (or >= limit when atLeast).
	ratio := func(name string, num, den *float64, limit float64, atLeast bool, what string) {
		t := Target{Name: name, Limit: limit, Measured: "missing figure"}
		if num != nil && den != nil && *den > 0 {
			r := *num / *den
			met := r <= limit
			if atLeast {
				met = r >= limit
			}
			t.Ratio, t.Met = &r, &met
			t.Measured = fmt.Sprintf("%.2f× (%s)", r, fmt.Sprintf(what, *num, *den))
		}
		out = append(out, t)
	}
	ratio("lease uncontended p50 ≤ 1.15× raw", get("lease", "uncontended", p50), get("raw", "uncontended", p50), 1.15, false, "%.1f µs / %.1f µs")
	ratio("lease parallel ≥ 0.9× raw", get("lease", "parallel", ops), get("raw", "parallel", ops), 0.9, true, "%.0f / %.0f ops/s")

	wake := get("lease", "wake", p50)
	t := Target{Name: "lease wake p50 < 500 µs", Limit: 500, Measured: "missing figure"}
	if wake != nil {
		met := *wake < 500
		t.Ratio, t.Met, t.Measured = wake, &met, fmt.Sprintf("%.1f µs", *wake)
	}
	out = append(out, t)
	ratio("lease wake ≥ 20× faster than redislock", get("redislock", "wake", p50), wake, 20, true, "%.0f µs / %.1f µs")
	ratio("lease wake ≥ 200× faster than redsync-1", get("redsync-1", "wake", p50), wake, 200, true, "%.0f µs / %.1f µs")
	ratio("redlock-5 uncontended p50 ≤ redsync-5", get("redlock-5", "uncontended", p50), get("redsync-5", "uncontended", p50), 1, false, "%.1f µs / %.1f µs")
	ratio("pg_guarded p50 ≤ 1.2× pg_unguarded", get("postgres", "pg_guarded", p50), get("postgres", "pg_unguarded", p50), 1.2, false, "%.1f µs / %.1f µs")
	return out
}
