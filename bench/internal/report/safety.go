package report

import (
	"fmt"
	"slices"

	"github.com/fencelock/fencelock/bench/internal/locks"
)

// Safety is one run of `bench safety`: what -json writes and -html shows.
type Safety struct {
	Header
	// TTL is the lock TTL every kind gets; Rounds the faulted rounds per
	// cell; Extra the unfaulted cycles after each faulted round.
	TTL    string `json:"ttl"`
	Rounds int    `json:"rounds"`
	Extra  int    `json:"extra_ops_per_round"`
	// Scenarios and Locks describe the rows and columns, in run order.
	Scenarios  []ScenarioInfo `json:"scenarios"`
	Locks      []LockInfo     `json:"locks"`
	Results    []SafetyResult `json:"results"`
	Violations []string       `json:"violations"` // must-hold rules broken; empty on a good run
}

// ScenarioInfo names one failure scenario and says how it was provoked.
type ScenarioInfo struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	How   string `json:"how"`
}

// LockInfo names one lock kind. Fenced kinds pass their token to the
// verifier; the must-hold rules say they never lose an update.
type LockInfo struct {
	Name   string       `json:"name"`
	Family locks.Family `json:"family"`
	Fenced bool         `json:"fenced"`
	Nodes  int          `json:"nodes"`
	Note   string       `json:"note"`
}

// SafetyResult is one lock kind in one scenario: what the protected data
// suffered, from the checker.
type SafetyResult struct {
	Scenario string `json:"scenario"`
	Lock     string `json:"lock"`
	// Ops is read-modify-write cycles that got the lock; Acked the writes
	// that committed, Rejected those the verifier refused, Failed the
	// cycles that ended in another error (no lock within the wait, a
	// Redis or Postgres error).
	Ops      int `json:"ops"`
	Acked    int `json:"acked"`
	Rejected int `json:"rejected"`
	Failed   int `json:"failed"`
	// Healed is acked writes whose first token the verifier refused (the
	// counter had gone backwards) and that landed after heal.Write
	// reissued the token.
	Healed int `json:"healed"`
	// LostUpdates is acknowledged adds missing from the final data;
	// StaleAccepted is committed writes from an older acquisition than a
	// write committed before them; Overlaps is pairs of cycles whose
	// holders both believed they held the lock at the same time.
	LostUpdates   int `json:"lost_updates"`
	StaleAccepted int `json:"stale_accepted"`
	Overlaps      int `json:"overlaps"`
	// Anomalies is LostUpdates + StaleAccepted.
	Anomalies int     `json:"anomalies"`
	Seconds   float64 `json:"seconds"`
	// Error is set when the cell could not run to the end; its counts
	// are then what was checked before the error.
	Error string `json:"error,omitempty"`
	// Cycles is every cycle of the cell as its worker saw it, in the
	// order they ended: the evidence behind the counts.
	Cycles []Cycle `json:"cycles,omitempty"`
}

// Bad reports whether the protected data suffered in r: an acknowledged
// update lost or a stale write accepted.
func (r *SafetyResult) Bad() bool {
	return r.Anomalies > 0 || r.LostUpdates > 0 || r.StaleAccepted > 0
}

// Outcomes of one cycle.
const (
	Acked    = "acked"    // the write committed
	Rejected = "rejected" // the verifier refused the token
	Aborted  = "aborted"  // the holder saw its lock was gone before writing
	Failed   = "failed"   // anything else after the lock was taken
	NoLock   = "nolock"   // the lock was not acquired in time
)

// Cycle is what one read-modify-write cycle did, as its worker saw it.
type Cycle struct {
	Worker  string `json:"worker"`
	Epoch   int64  `json:"epoch"`
	Item    string `json:"item"`
	Outcome string `json:"outcome"`
	Err     string `json:"err,omitempty"`
	// Start and End bound the time the worker acted as the holder: from
	// the acquire's return to the write's (or the abort's) return, in Unix
	// nanoseconds of this machine's clock, shared by every process.
	Start int64 `json:"start_ns"`
	End   int64 `json:"end_ns"`
	// Stalled is how long the worker was held up before its write, in
	// nanoseconds (0 when it was not).
	Stalled int64 `json:"stalled_ns,omitempty"`
	// Healed: the verifier refused the first token (the counter had gone
	// backwards), heal.Write reissued it and the write landed.
	Healed bool `json:"healed,omitempty"`
}

// Fenced reports whether lock kind name is fenced.
func (r *Safety) Fenced(name string) bool {
	i := slices.IndexFunc(r.Locks, func(l LockInfo) bool { return l.Name == name })
	return i >= 0 && r.Locks[i].Fenced
}

// Result returns the cell of scenario and lock, or nil.
func (r *Safety) Result(scenario, lock string) *SafetyResult {
	for i := range r.Results {
		if r.Results[i].Scenario == scenario && r.Results[i].Lock == lock {
			return &r.Results[i]
		}
	}
	return nil
}

// Check fills Violations: a fenced kind with an anomaly or an error, or a
// scenario in which no unfenced kind showed an anomaly (a scenario that
// provokes nothing is not a scenario).
func (r *Safety) Check() {
	r.Violations = []string{}
	for _, s := range r.Scenarios {
		provoked := false
		unfenced := 0
		for _, l := range r.Locks {
			c := r.Result(s.Name, l.Name)
			if c == nil {
				continue
			}
			switch {
			case l.Fenced && c.Anomalies > 0:
				r.Violations = append(r.Violations, fmt.Sprintf("%s/%s: fenced kind lost %s and accepted %s",
					s.Name, l.Name, Plural(c.LostUpdates, "update"), Plural(c.StaleAccepted, "stale write")))
			case l.Fenced && c.Error != "":
				r.Violations = append(r.Violations, fmt.Sprintf("%s/%s: did not run to the end: %s", s.Name, l.Name, c.Error))
			case !l.Fenced:
				unfenced++
				if c.Anomalies > 0 {
					provoked = true
				} else if c.Error == "" {
					r.Violations = append(r.Violations, fmt.Sprintf("%s/%s: unfenced kind showed no anomaly", s.Name, l.Name))
				}
			}
		}
		if unfenced > 0 && !provoked {
			r.Violations = append(r.Violations, fmt.Sprintf("%s: provoked nothing in any unfenced kind", s.Name))
		}
	}
}

// facts are the safety run's own facts for the header line.
func (r *Safety) facts(html bool) []string {
	rounds := Plural(r.Rounds, "round")
	if html {
		rounds = Plural(r.Rounds, "faulted round") + " per cell"
	}
	if r.Extra > 0 {
		rounds += fmt.Sprintf(" (+%s each)", Plural(r.Extra, "clean op"))
	}
	return []string{"ttl " + r.TTL, rounds}
}
