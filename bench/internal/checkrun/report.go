package checkrun

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// Report is a `bench check` run: the JSON file, and what the table and the
// timeline are drawn from.
type Report struct {
	report.Header
	Seed     int64  `json:"seed"`
	Replay   string `json:"replay"` // the command that replays the schedule
	Clients  int    `json:"clients"`
	Duration string `json:"duration"` // per kind
	TTL      string `json:"ttl"`
	Kinds    []Kind `json:"kinds"`
}

// Kind is one lock kind's run: the checker's Run (summary, schedule
// applied, results, final state, history) and what the runner adds.
type Kind struct {
	Lock report.LockInfo `json:"lock"`
	check.Run
	// Skipped is the windows not applied to this kind, each with its
	// reason in Detail (the kind's servers cannot take the fault, or it
	// failed to apply).
	Skipped []check.Window `json:"skipped,omitempty"`
	// AcquireFailures counts acquisitions that failed (no op is recorded
	// for them); LastAcquireError is the last one's error.
	AcquireFailures  int64  `json:"acquire_failures"`
	LastAcquireError string `json:"last_acquire_error,omitempty"`
	// Pauses counts the paused-holder stops clients served.
	Pauses int64  `json:"pauses"`
	Error  string `json:"error,omitempty"`
}

// Violations lists the must-hold rules the run broke: a fenced kind with
// an anomaly. (An unfenced kind with none is reported, not a violation:
// a short or unlucky run may not provoke one.)
func (r *Report) Violations() []string {
	var out []string
	for _, k := range r.Kinds {
		if n := k.Summary.TotalAnomalies(); k.Lock.Fenced && n > 0 {
			out = append(out, fmt.Sprintf("%s: %s", k.Lock.Name, plural(n, "anomaly", "anomalies")))
		}
	}
	return out
}

// writeText prints the table and the notes under it.
func (r *Report) writeText(w io.Writer) error {
	fmt.Fprintf(w, "bench check: %d clients, %s per kind, TTL %s, seed %d\n", r.Clients, r.Duration, r.TTL, r.Seed)
	var sums []check.Summary
	for _, k := range r.Kinds {
		sums = append(sums, k.Summary)
	}
	if err := check.WriteTable(w, sums); err != nil {
		return err
	}
	var notes []string
	for _, k := range r.Kinds {
		if k.Error != "" {
			notes = append(notes, fmt.Sprintf("%s: ERROR %s", k.Lock.Name, k.Error))
		}
		if len(k.Skipped) > 0 {
			var s []string
			for _, win := range k.Skipped {
				s = append(s, fmt.Sprintf("%s (%s)", win.Fault, strings.TrimPrefix(win.Detail, "skipped: ")))
			}
			notes = append(notes, fmt.Sprintf("%s: %s not applied: %s", k.Lock.Name,
				report.Plural(len(k.Skipped), "fault window"), strings.Join(dedup(s), "; ")))
		}
		if k.AcquireFailures > 0 {
			notes = append(notes, fmt.Sprintf("%s: %s (no op recorded), last: %s", k.Lock.Name,
				report.Plural(int(k.AcquireFailures), "failed acquisition"), oneLine(k.LastAcquireError)))
		}
	}
	var quiet []string
	for _, k := range r.Kinds {
		if !k.Lock.Fenced && k.Error == "" && k.Summary.TotalAnomalies() == 0 {
			quiet = append(quiet, k.Lock.Name)
		}
	}
	if len(quiet) > 0 {
		notes = append(notes, fmt.Sprintf("no anomaly provoked this run in %s (unfenced: anomalies are possible, not certain)",
			strings.Join(quiet, ", ")))
	}
	if v := r.Violations(); len(v) > 0 {
		notes = append(notes, "MUST-HOLD RULE BROKEN (fenced kinds must show no anomaly): "+strings.Join(v, ", "))
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "replay the schedule: %s\n", r.Replay)
	return err
}

// oneLine joins the lines of a joined error, cut to 160 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:159]) + "…"
	}
	return s
}

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// writeFiles writes the JSON and the HTML timeline, when asked for.
func (r *Report) writeFiles(o *options) error {
	if o.jsonFile != "" {
		if err := report.WriteJSON(o.jsonFile, r); err != nil {
			return err
		}
	}
	if o.htmlFile == "" {
		return nil
	}
	runs := make([]check.Run, len(r.Kinds))
	for i, k := range r.Kinds {
		runs[i] = k.Run
	}
	f, err := os.Create(o.htmlFile)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("bench check — seed %d, %d clients, %s per kind", r.Seed, r.Clients, r.Duration)
	if err := check.WriteTimeline(f, title, runs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
