package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is one lock kind's line of a check run.
type Summary struct {
	Kind   string `json:"kind"`
	Fenced bool   `json:"fenced"`
	// Seed replays the run's fault schedule.
	Seed     int64         `json:"seed"`
	Duration time.Duration `json:"duration_ns"`
	Clients  int           `json:"clients"`
	Faults   int           `json:"faults"` // fault windows in the schedule

	Ops      int `json:"ops"`
	Acked    int `json:"acked"`    // ok
	Rejected int `json:"rejected"` // writes the verifier refused
	Failed   int `json:"failed"`   // other failures
	Unknown  int `json:"unknown"`
	// Leases is the acquisitions recorded (the exclusion checker's windows).
	Leases int `json:"leases"`

	// Anomalies counts the anomalies each checker found, by checker name
	// (every checker that ran has an entry, 0 included).
	Anomalies map[string]int `json:"anomalies"`
	// Undecided counts, by checker, operations it could not judge.
	Undecided map[string]int `json:"undecided,omitempty"`
}

// TotalAnomalies is the sum over checkers.
func (s *Summary) TotalAnomalies() int {
	n := 0
	for _, v := range s.Anomalies {
		n += v
	}
	return n
}

// DataAnomalies is the sum over the [DataCheckers]: what the protected
// data suffered.
func (s *Summary) DataAnomalies() int {
	n := 0
	for _, c := range DataCheckers {
		n += s.Anomalies[c]
	}
	return n
}

// LockAnomalies is the sum over the checkers of the lock itself
// (exclusion, liveness): lock bugs.
func (s *Summary) LockAnomalies() int { return s.TotalAnomalies() - s.DataAnomalies() }

// Summarize counts a history's outcomes and the checkers' findings.
func Summarize(kind string, fenced bool, seed int64, h History, schedule []Window, results ...Result) Summary {
	s := Summary{
		Kind: kind, Fenced: fenced, Seed: seed, Duration: h.Span(), Faults: len(schedule),
		Ops: len(h.Ops), Leases: len(h.Leases), Anomalies: map[string]int{},
	}
	clients := map[int]bool{}
	for i := range h.Ops {
		op := &h.Ops[i]
		clients[op.Client] = true
		switch {
		case op.Outcome == Ok:
			s.Acked++
		case op.Outcome == Fail && op.Rejected:
			s.Rejected++
		case op.Outcome == Fail:
			s.Failed++
		default:
			s.Unknown++
		}
	}
	s.Clients = len(clients)
	for _, r := range results {
		s.Anomalies[r.Checker] += len(r.Anomalies)
		if r.Skipped > 0 {
			if s.Undecided == nil {
				s.Undecided = map[string]int{}
			}
			s.Undecided[r.Checker] += r.Skipped
		}
	}
	return s
}

// Run is everything a check run produced for one lock kind: what the JSON
// report holds and what the timeline draws.
type Run struct {
	Summary  Summary  `json:"summary"`
	Schedule []Window `json:"schedule"`
	Results  []Result `json:"results"`
	Final    Final    `json:"final"`
	History  History  `json:"history"`
}

// Anomalies lists every checker's anomalies.
func (r *Run) Anomalies() []Anomaly {
	var out []Anomaly
	for _, res := range r.Results {
		out = append(out, res.Anomalies...)
	}
	return out
}

// WriteJSON writes runs as indented JSON.
func WriteJSON(w io.Writer, runs []Run) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(runs)
}

// ReadJSON reads what WriteJSON wrote.
func ReadJSON(r io.Reader) ([]Run, error) {
	var runs []Run
	err := json.NewDecoder(r).Decode(&runs)
	return runs, err
}

// WriteTable prints one line per lock kind. Anomaly counts carry "!" when
// not zero and "?" when part of the history was undecided; fenced kinds are
// marked "*".
func WriteTable(w io.Writer, sums []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"lock", "ops", "acked", "rejected", "failed", "unknown"}
	for _, c := range Checkers {
		head = append(head, c)
	}
	head = append(head, "faults", "seed")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	undecided, fencedSeen := false, false
	for _, s := range sums {
		name := s.Kind
		if s.Fenced {
			name += "*"
			fencedSeen = true
		}
		row := []string{name, fmt.Sprint(s.Ops), fmt.Sprint(s.Acked), fmt.Sprint(s.Rejected),
			fmt.Sprint(s.Failed), fmt.Sprint(s.Unknown)}
		for _, c := range Checkers {
			n, ran := s.Anomalies[c]
			cell := "—"
			if ran {
				cell = fmt.Sprint(n)
				if n > 0 {
					cell += "!"
				}
			}
			if s.Undecided[c] > 0 {
				cell += "?"
				undecided = true
			}
			row = append(row, cell)
		}
		row = append(row, fmt.Sprint(s.Faults), fmt.Sprint(s.Seed))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	if fencedSeen {
		notes = append(notes, "* fenced: writes carry a token the storage verifies")
	}
	notes = append(notes, "! anomalies found (count per checker)")
	if undecided {
		notes = append(notes, "? part of the history undecided (see the JSON notes)")
	}
	_, err := fmt.Fprintln(w, strings.Join(notes, "   "))
	return err
}
