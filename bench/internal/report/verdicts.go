package report

// The verdict words: of a performance target (Target.Verdict) and of the
// safety run's must-hold rules (its last text line and the HTML's verdict
// box). bench/README.md names them where it explains the verdicts (a test
// checks), so change both together.
const (
	// VerdictMet: the target holds on this run.
	VerdictMet = "met"
	// VerdictMissed: the target does not hold on this run.
	VerdictMissed = "MISSED"
	// VerdictNA: a figure the target needs is missing.
	VerdictNA = "n/a"

	// VerdictOK: every must-hold rule held.
	VerdictOK = "ok"
	// VerdictViolated follows the number of must-hold rules broken, which
	// are listed after it.
	VerdictViolated = "VIOLATED"
)
