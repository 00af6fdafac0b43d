package perf

import (
	"slices"
	"sync"
	"time"

	"github.com/fencelock/fencelock/bench/internal/report"
)

// errorLog counts errors and keeps the first, for the report.
type errorLog struct {
	mu    sync.Mutex
	n     int
	first string
}

func (e *errorLog) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		e.first = err.Error()
	}
	e.n++
}

func (e *errorLog) fill(r *report.Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.Errors, r.FirstErr = e.n, e.first
}

// setLatency fills p50 and p99 (nearest rank) from samples.
func setLatency(r *report.Result, samples []time.Duration) {
	r.Samples = len(samples)
	if len(samples) == 0 {
		return
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	r.P50us = report.Ptr(us(percentile(s, 0.50)))
	r.P99us = report.Ptr(us(percentile(s, 0.99)))
}

// percentile returns the nearest-rank percentile of sorted s.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// skipped is the result of a scenario that needs a waiting acquire, for a
// lock without one.
func skipped(l string, scenario string) report.Result {
	return report.Result{Lock: l, Scenario: scenario, Skipped: true, Note: "no waiting acquire in this lock"}
}
