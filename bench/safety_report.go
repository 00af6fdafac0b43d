package main

import (
	"encoding/json"
	"fmt"
	"slices"
)

// SafetyReport is one run of `bench safety`: what -json writes and -html
// shows.
type SafetyReport struct {
	Command   string            `json:"command"`
	Timestamp string            `json:"timestamp"`
	Quick     bool              `json:"quick"`
	Elapsed   string            `json:"elapsed"`
	Machine   Machine           `json:"machine"`
	Versions  map[string]string `json:"versions"`
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
	Name   string `json:"name"`
	Fenced bool   `json:"fenced"`
	Nodes  int    `json:"nodes"`
	Note   string `json:"note"`
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
	Cycles []cycle `json:"cycles,omitempty"`
}

// fenced reports whether lock kind name is fenced.
func (r *SafetyReport) fenced(name string) bool {
	i := slices.IndexFunc(r.Locks, func(l LockInfo) bool { return l.Name == name })
	return i >= 0 && r.Locks[i].Fenced
}

// result returns the cell of scenario and lock, or nil.
func (r *SafetyReport) result(scenario, lock string) *SafetyResult {
	for i := range r.Results {
		if r.Results[i].Scenario == scenario && r.Results[i].Lock == lock {
			return &r.Results[i]
		}
	}
	return nil
}

// check fills Violations: a fenced kind with an anomaly or an error, or a
// scenario in which no unfenced kind showed an anomaly (a scenario that
// provokes nothing is not a scenario).
func (r *SafetyReport) check() {
	r.Violations = []string{}
	for _, s := range r.Scenarios {
		provoked := false
		unfenced := 0
		for _, l := range r.Locks {
			c := r.result(s.Name, l.Name)
			if c == nil {
				continue
			}
			switch {
			case l.Fenced && c.Anomalies > 0:
				r.Violations = append(r.Violations, fmt.Sprintf("%s/%s: fenced kind lost %d updates and accepted %d stale writes",
					s.Name, l.Name, c.LostUpdates, c.StaleAccepted))
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

func writeSafetyJSON(path string, rep *SafetyReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(b, '\n'))
}
