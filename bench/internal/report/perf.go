package report

import (
	"fmt"
	"strings"
	"time"
)

// Perf is one run of `bench perf`: what -json writes and -html shows.
type Perf struct {
	Header
	Locks   map[string]string `json:"locks,omitempty"` // each lock's setup, by name
	Results []Result          `json:"results"`
	// Ceilings is time.Sleep of the hold time, measured in the same rounds
	// as hotkey and hotkey64 (Lock "time.Sleep", Scenario the hotkey
	// scenario): the most critical sections a second any lock can give.
	Ceilings []Result `json:"ceilings,omitempty"`
	Targets  []Target `json:"targets"`
}

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
	Workers   int      `json:"workers,omitempty"`   // parallel, hotkey, waiters: goroutines
	Keys      int      `json:"keys,omitempty"`      // waiters: keys they wait on
	Permits   int      `json:"permits,omitempty"`   // the semaphore rows: N
	// hotkey, hotkey64 and their sleep ceiling: how long each critical
	// section holds the lock (the ceiling: each sleep), in ms.
	HoldMs *float64 `json:"hold_ms,omitempty"`
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
	// cost: per acquire+release, each lock alone: the bench process's
	// allocations and bytes (runtime.MemStats), and the commands the lock's
	// servers ran (INFO commandstats, summed over its nodes), in all and by
	// command name.
	AllocsPerOp *float64           `json:"allocs_per_op,omitempty"`
	BytesPerOp  *float64           `json:"bytes_per_op,omitempty"`
	CmdsPerOp   *float64           `json:"commands_per_op,omitempty"`
	Commands    map[string]float64 `json:"commands,omitempty"`
	// Interleaved scenarios (uncontended, parallel, wake, hotkey,
	// hotkey64, and the database writes pg_*, sql_*): the lock's (write's)
	// figure in each round (p50 µs, or ops/s), in round order; null for a
	// round with no figure. Every lock ran a short slice in each round, in
	// turn, so PerRound[i] of two locks were measured moments apart: their
	// ratio is a paired ratio.
	PerRound Figures `json:"per_round,omitempty"`
	// The medians of the paired ratios: this lock's figure over raw's, over
	// the best peer's (named by BestPeer: the peer with the best figure of
	// the run), and (hotkey) over the sleep ceiling's, round by round.
	VsRaw     *float64 `json:"vs_raw,omitempty"`
	VsBest    *float64 `json:"vs_best_peer,omitempty"`
	BestPeer  string   `json:"best_peer,omitempty"`
	VsCeiling *float64 `json:"vs_ceiling,omitempty"`
	// wake: the samples whose waiter had the lock before the holder's
	// Release returned (counted as 0 µs in P50us and P99us).
	BeforeRelease int    `json:"before_release,omitempty"`
	Errors        int    `json:"errors,omitempty"`
	FirstErr      string `json:"first_error,omitempty"`
	Skipped       bool   `json:"skipped,omitempty"`
	Note          string `json:"note,omitempty"`
}

// Target is one of the performance targets, checked on one run.
type Target struct {
	Name     string   `json:"name"`
	Ratio    *float64 `json:"ratio,omitempty"` // the measured ratio (or value) compared with Limit
	Limit    float64  `json:"limit"`
	Measured string   `json:"measured"`
	Met      *bool    `json:"met,omitempty"` // nil when a figure is missing
}

// Verdict is VerdictMet, VerdictMissed, or VerdictNA when a figure is
// missing.
func (t Target) Verdict() string {
	switch {
	case t.Met == nil:
		return VerdictNA
	case *t.Met:
		return VerdictMet
	}
	return VerdictMissed
}

// Find returns the result of lock in scenario that ran, or nil.
func Find(rs []Result, lock, scenario string) *Result {
	for i := range rs {
		if rs[i].Lock == lock && rs[i].Scenario == scenario && !rs[i].Skipped {
			return &rs[i]
		}
	}
	return nil
}

// Field is f(r), or nil when r is nil.
func Field(r *Result, f func(*Result) *float64) *float64 {
	if r == nil {
		return nil
	}
	return f(r)
}

// Ptr and IntPtr make the optional figures of a Result.
func Ptr(f float64) *float64 { return &f }
func IntPtr(n int) *int      { return &n }

// ErrorCause names the cause of an error message in a few words, for a
// table: "node timeout", "timeout", "not acquired", ...
func ErrorCause(msg string) string {
	m := strings.ToLower(msg)
	for _, c := range []struct{ has, cause string }{
		{"node did not answer in time", "node timeout"},
		{"context deadline exceeded", "timeout"},
		{"i/o timeout", "timeout"},
		{"connection refused", "connection refused"},
		{"connection reset", "connection reset"},
		{"eof", "connection closed"},
		{"not acquired", "not acquired"},
		{"lock is held", "not acquired"},
		{"failed to acquire", "not acquired"},
		{"not obtained", "not acquired"},
		{"holders at once", "two holders"},
	} {
		if strings.Contains(m, c.has) {
			return c.cause
		}
	}
	if r := []rune(msg); len(r) > 32 {
		return string(r[:31]) + "…"
	}
	return msg
}

// errorsOf is a lock's error count over the results rs picks, with the
// cause of the first error of the result that had the most: "193 (node
// timeout)", or "0".
func errorsOf(rs []Result, pick func(*Result) bool) string {
	n, most, first := 0, 0, ""
	for i := range rs {
		r := &rs[i]
		if !pick(r) {
			continue
		}
		n += r.Errors
		if r.Errors > most {
			most, first = r.Errors, r.FirstErr
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", n, ErrorCause(first))
}

// IsWriteShape reports whether r times a database write with or without a
// verifier's guard (the pg_ and sql_ scenarios), whose Lock names the
// database, not a lock.
func IsWriteShape(r Result) bool {
	return strings.HasPrefix(r.Scenario, "pg_") || strings.HasPrefix(r.Scenario, "sql_")
}

// lockRows returns the locks in rs in the order they first appear (the
// order they ran in), the database rows left out.
func lockRows(rs []Result) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !IsWriteShape(r) && !seen[r.Lock] {
			seen[r.Lock] = true
			out = append(out, r.Lock)
		}
	}
	return out
}

// holdOf is the hold of the first of rs that has one: "1 ms", and as a
// duration; ok is false for a run recorded before hold_ms.
func holdOf(rs ...*Result) (text string, d time.Duration, ok bool) {
	for _, r := range rs {
		if r != nil && r.HoldMs != nil {
			return fmt.Sprintf("%g ms", *r.HoldMs), time.Duration(*r.HoldMs * float64(time.Millisecond)), true
		}
	}
	return "", 0, false
}

func fmtUs(p *float64) string {
	if p == nil {
		return "—"
	}
	if *p >= 1000 {
		return fmt.Sprintf("%.0f", *p)
	}
	return fmt.Sprintf("%.1f", *p)
}
