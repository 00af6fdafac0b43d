package main

import (
	"slices"
	"sync"
	"time"
)

// Result is one lock in one scenario: one row of the JSON's results.
type Result struct {
	Lock      string   `json:"lock"`
	Scenario  string   `json:"scenario"`
	P50us     *float64 `json:"p50_us,omitempty"`
	P99us     *float64 `json:"p99_us,omitempty"`
	OpsPerSec *float64 `json:"ops_per_sec,omitempty"`
	Samples   int      `json:"samples,omitempty"`
	MinShare  *float64 `json:"min_share,omitempty"` // hotkey: smallest worker's share of the critical sections
	MaxShare  *float64 `json:"max_share,omitempty"` // hotkey: largest worker's share
	Workers   int      `json:"workers,omitempty"`   // hotkey, waiters: goroutines
	Keys      int      `json:"keys,omitempty"`      // waiters: keys they wait on
	// waiters: connections of the lock's own client(s) (found in CLIENT LIST
	// by their name), of those the ones in pub/sub, and every connection on
	// the lock's servers; the largest of two reads while the waiters wait.
	Conns       *int `json:"conns,omitempty"`
	PubSubConns *int `json:"pubsub_conns,omitempty"`
	ServerConns *int `json:"server_conns,omitempty"`
	// waiters: the bench process's CPU time (user+system) per second of wall
	// time while the waiters wait, and the time from the holders' release to
	// the last waiter's acquire (nil unless every waiter got the lock).
	CPUPerSec     *float64 `json:"cpu_per_sec,omitempty"`
	AllAcquiredMs *float64 `json:"all_acquired_ms,omitempty"`
	Errors        int      `json:"errors,omitempty"`
	FirstErr      string   `json:"first_error,omitempty"`
	Skipped       bool     `json:"skipped,omitempty"`
	Note          string   `json:"note,omitempty"`
}

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

func (e *errorLog) fill(r *Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.Errors, r.FirstErr = e.n, e.first
}

func ptr(f float64) *float64 { return &f }

func iptr(n int) *int { return &n }

// setLatency fills p50 and p99 (nearest rank) from samples.
func (r *Result) setLatency(samples []time.Duration) {
	r.Samples = len(samples)
	if len(samples) == 0 {
		return
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	r.P50us = ptr(us(percentile(s, 0.50)))
	r.P99us = ptr(us(percentile(s, 0.99)))
}

// percentile returns the nearest-rank percentile of sorted s.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
