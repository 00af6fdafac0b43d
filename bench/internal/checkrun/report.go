package checkrun

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/locks"
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
	Pauses int64 `json:"pauses"`
	// Waiters is what the waiter processes of pause-waiter and leave-queue
	// went through (fencelock's lease kinds).
	Waiters *WaiterStats `json:"waiters,omitempty"`
	// Election is what the election workload's leader processes went
	// through (its row only).
	Election *ElectionStats `json:"election,omitempty"`
	// Semaphore is what the semaphore workload's writer processes went
	// through (its rows only).
	Semaphore *SemaphoreStats `json:"semaphore,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// Violations lists the must-hold rules the run broke: a fenced kind with
// an anomaly of its data, or one of fencelock's kinds with an anomaly of
// the lock itself (two holders at once that no data-loss fault explains,
// a lock left stuck by a waiter that left): a lock bug. (An unfenced kind
// with no data anomaly is reported, not a violation: a short or unlucky
// run may not provoke one.)
func (r *Report) Violations() []string {
	var out []string
	for _, k := range r.Kinds {
		if n := k.Summary.DataAnomalies(); k.Lock.Fenced && n > 0 {
			out = append(out, fmt.Sprintf("%s: %s", k.Lock.Name, plural(n, "anomaly", "anomalies")))
		}
		if n := k.Summary.LockAnomalies(); k.Lock.Family == locks.Fencelock && n > 0 {
			out = append(out, fmt.Sprintf("%s: %s of the lock (%s)", k.Lock.Name, plural(n, "anomaly", "anomalies"),
				lockCheckers(k.Summary)))
		}
	}
	return out
}

// lockCheckers names the lock checkers with anomalies.
func lockCheckers(s check.Summary) string {
	var out []string
	for _, c := range []string{check.CheckerExclusion, check.CheckerLiveness} {
		if s.Anomalies[c] > 0 {
			out = append(out, fmt.Sprintf("%s %d", c, s.Anomalies[c]))
		}
	}
	return strings.Join(out, ", ")
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
		// What the waiter processes went through, and what the lock
		// checkers found and noted (overlaps explained by data loss, a
		// lock handed to a waiter that left); the JSON has them all.
		if ws := k.Waiters; ws != nil {
			notes = append(notes, waiterNotes(k.Lock.Name, ws)...)
		}
		if es := k.Election; es != nil {
			notes = append(notes, fmt.Sprintf("%s: %d leader processes, %d terms; %d leaders paused past their term (%d deposed meanwhile), %d killed (longest wait for the next term %s); %s refused",
				k.Lock.Name, es.Processes, es.Terms, es.Pauses, es.Deposed, es.Kills, es.Failover,
				report.Plural(k.Summary.Rejected, "late append")))
		}
		if ss := k.Semaphore; ss != nil {
			notes = append(notes, fmt.Sprintf("%s: %d permits, %d writer processes, %d permits granted; %d holders stopped past their ttl (slot granted to another meanwhile in %d), %d delayed writes, %d waiters stopped, %d holders killed (longest wait for the slot's next grant %s), %d Redis restarts; %s refused",
				k.Lock.Name, ss.Permits, ss.Processes, ss.Acquired, ss.Pauses, ss.Passed, ss.Delays, ss.WaiterPauses, ss.Kills, ss.Freed, ss.Restarts,
				report.Plural(k.Summary.Rejected, "late append")))
		}
		for _, res := range k.Results {
			if res.Checker != check.CheckerExclusion && res.Checker != check.CheckerLiveness {
				continue
			}
			var lines []string
			for _, a := range res.Anomalies {
				lines = append(lines, fmt.Sprintf("%s: %s ANOMALY %s: %s", k.Lock.Name, res.Checker, a.Kind, a.Detail))
			}
			for _, n := range res.Notes {
				lines = append(lines, fmt.Sprintf("%s: %s: %s", k.Lock.Name, res.Checker, n))
			}
			if len(lines) > maxLockLines {
				lines = append(lines[:maxLockLines], fmt.Sprintf("%s: %s: … %d more in the JSON", k.Lock.Name, res.Checker, len(lines)-maxLockLines))
			}
			notes = append(notes, lines...)
		}
	}
	var quiet []string
	for _, k := range r.Kinds {
		if !k.Lock.Fenced && k.Error == "" && k.Summary.DataAnomalies() == 0 {
			quiet = append(quiet, k.Lock.Name)
		}
	}
	if len(quiet) > 0 {
		notes = append(notes, fmt.Sprintf("no anomaly provoked this run in %s (unfenced: anomalies are possible, not certain)",
			strings.Join(quiet, ", ")))
	}
	if v := r.Violations(); len(v) > 0 {
		notes = append(notes, "MUST-HOLD RULE BROKEN (fenced kinds must show no anomaly, fencelock's locks no lock anomaly): "+strings.Join(v, ", "))
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "replay the schedule: %s\n", r.Replay)
	return err
}

// maxLockLines bounds the lines printed per lock checker and kind.
const maxLockLines = 4

// waiterNotes sums up what the waiter processes went through.
func waiterNotes(kind string, ws *WaiterStats) []string {
	var out []string
	if ws.Frozen > 0 {
		out = append(out, fmt.Sprintf("%s: pause-waiter: %s frozen while queued; the lock was handed to %d while frozen, and taken by another client after that lease's ttl in %d; %d Acquire calls returned a lease after the SIGCONT",
			kind, report.Plural(ws.Frozen, "waiter"), ws.HandedFrozen, ws.TakenBeforeCont, ws.LeaseAfterCont))
	}
	if len(ws.Left) > 0 {
		n := 0
		var hows []string
		for _, h := range leaveHows {
			if ws.Left[h] > 0 {
				n += ws.Left[h]
				hows = append(hows, fmt.Sprintf("%d by %s", ws.Left[h], h))
			}
		}
		out = append(out, fmt.Sprintf("%s: leave-queue: %s left while queued (%s), %d after lease.Client.Close",
			kind, report.Plural(n, "waiter"), strings.Join(hows, ", "), ws.Closed))
	}
	if ws.NotQueued > 0 {
		out = append(out, fmt.Sprintf("%s: %d of the waiter processes never queued (the lock was free at each try) or did not start", kind, ws.NotQueued))
	}
	return out
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
