package check

// Checker names, used as keys of [Summary.Anomalies].
const (
	CheckerFencedMutex  = "fenced-mutex"
	CheckerLostUpdate   = "lost-update"
	CheckerLinearizable = "linearizable"
	CheckerPermits      = "permits"
	CheckerExclusion    = "exclusion"
	CheckerLiveness     = "liveness"
)

// Checkers lists the checker names in report order.
var Checkers = []string{CheckerFencedMutex, CheckerLostUpdate, CheckerLinearizable, CheckerPermits, CheckerExclusion, CheckerLiveness}

// DataCheckers are the checkers of what the protected data suffered; the
// others (exclusion, liveness) check the lock itself. The permits checker
// runs on a semaphore's writes only.
var DataCheckers = []string{CheckerFencedMutex, CheckerLostUpdate, CheckerLinearizable, CheckerPermits}

// Anomaly kinds.
const (
	// fenced mutex
	AnomalyStaleToken  = "stale-token" // accepted after a higher Seq
	AnomalyConflict    = "conflict"    // same Seq, another holder
	AnomalyInterleaved = "interleaved" // unfenced: two holders' writes interleave (A, B, A)
	// lost updates
	AnomalyLostIncr      = "lost-increment"   // acknowledged increments missing from the final counter
	AnomalyDuplicateIncr = "duplicate-incr"   // two acknowledged increments wrote the same value
	AnomalyRolledBack    = "rolled-back"      // an acknowledged increment wrote more than the final counter
	AnomalyLostAppend    = "lost-append"      // an acknowledged element is not in the final set
	AnomalyPhantom       = "phantom"          // a failed write is in the final state
	AnomalyExtraIncr     = "extra-increments" // the counter exceeds acknowledged + unknown increments
	// linearizability
	AnomalyNotLinearizable = "not-linearizable"
	// permits (a semaphore)
	AnomalyOverPermits = "over-permits" // more holders' writes interleaved than the semaphore has permits
	// exclusion
	AnomalyOverlap = "overlap" // two leases' validity windows overlap, no data-loss fault explains it
	// liveness
	AnomalyStuck         = "stuck"           // no client got the lock within the bound after a waiter left
	AnomalyHandedToGhost = "handed-to-ghost" // the lock went to a waiter that had left cleanly
)

// Anomalies lists each checker's anomaly kinds; bench/README.md names the
// same (a test checks).
var Anomalies = map[string][]string{
	CheckerFencedMutex: {AnomalyStaleToken, AnomalyConflict, AnomalyInterleaved},
	CheckerLostUpdate: {AnomalyLostIncr, AnomalyDuplicateIncr, AnomalyRolledBack, AnomalyLostAppend,
		AnomalyPhantom, AnomalyExtraIncr},
	CheckerLinearizable: {AnomalyNotLinearizable},
	CheckerPermits:      {AnomalyOverPermits},
	CheckerExclusion:    {AnomalyOverlap},
	CheckerLiveness:     {AnomalyStuck, AnomalyHandedToGhost},
}

// Anomaly is one violation a checker found.
type Anomaly struct {
	Checker  string `json:"checker"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	// Ops are the ids of the operations involved, oldest first where order
	// matters (for a stale write: the newer accepted write, then the stale one).
	Ops []int `json:"ops,omitempty"`
	// Leases are the ids of the leases involved ([History.Leases]).
	Leases []int  `json:"leases,omitempty"`
	Detail string `json:"detail"`
	// Count is how many updates the anomaly stands for (e.g. increments
	// lost); 1 when it is a single event.
	Count int `json:"count"`
}

// Result is what one checker found over a history.
type Result struct {
	Checker string `json:"checker"`
	// Checked is the number of operations the checker looked at.
	Checked   int       `json:"checked"`
	Anomalies []Anomaly `json:"anomalies"`
	// Skipped counts operations the checker could not judge (an accepted
	// write without commit order; a register too hard to decide in time).
	Skipped int `json:"skipped,omitempty"`
	// Notes explain skips and inconclusive parts, e.g. a linearizability
	// check that timed out (neither a pass nor an anomaly).
	Notes []string `json:"notes,omitempty"`
	// Files are the visualizations written, if asked for.
	Files []string `json:"files,omitempty"`
}

// Valid reports whether the checker found no anomaly.
func (r *Result) Valid() bool { return len(r.Anomalies) == 0 }

// Inconclusive reports whether part of the history could not be judged.
func (r *Result) Inconclusive() bool { return r.Skipped > 0 }
