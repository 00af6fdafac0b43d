package check

import (
	"strings"
	"testing"
)

var livenessOpts = LivenessOptions{TTL: ms(100), TicketTTL: ms(200), Slack: ms(50)} // bound 350ms

// leaverHistory: waiter 9 left lock L (gone at 1000ms); client 1 takes the
// lock next at next ms (0: never); the run lasts until end ms.
func leaverHistory(how string, closed bool, next, end int) History {
	var b leases
	b.add(0, 1, "a", 900, 1000, 990)
	if next > 0 {
		b.add(1, 2, "b", next, next+100, next+20)
	}
	b.h.Ops = []Op{{ID: 0, Client: 0, Kind: KindRead, Resource: "r", Start: ms(end - 1), End: ms(end), Outcome: Ok}}
	b.h.Leaves = []Leave{{ID: 0, Client: 9, Lock: "L", How: how, Queued: ms(950), Left: ms(980), Gone: ms(1000), Closed: closed}}
	return b.h
}

func TestLivenessNextInTime(t *testing.T) {
	r := CheckLiveness(leaverHistory("cancel", true, 1010, 3000), nil, livenessOpts)
	wantNoAnomalies(t, r)
	if r.Checked != 1 || r.Skipped != 0 {
		t.Fatalf("checked %d skipped %d", r.Checked, r.Skipped)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "next acquired 10ms after the leaver was gone (median), 10ms at most; the bound is 350ms") {
		t.Fatalf("notes %q", r.Notes)
	}
	// just within the bound: a ghost held it for a ttl after a handoff
	// within the ticket lifetime
	wantNoAnomalies(t, CheckLiveness(leaverHistory("kill", false, 1340, 3000), nil, livenessOpts))
}

// caseNotes drops the summary note (how soon the lock was acquired again).
func caseNotes(r Result) []string {
	var out []string
	for _, n := range r.Notes {
		if !strings.Contains(n, "the lock was next acquired") {
			out = append(out, n)
		}
	}
	return out
}

func TestLivenessStuck(t *testing.T) {
	a := wantOneAnomaly(t, CheckLiveness(leaverHistory("sigterm", true, 1400, 3000), nil, livenessOpts), AnomalyStuck)
	if !strings.Contains(a.Detail, "400ms after its exit") || len(a.Leases) != 1 {
		t.Fatalf("detail %q leases %v", a.Detail, a.Leases)
	}
	wantOneAnomaly(t, CheckLiveness(leaverHistory("cancel", true, 0, 3000), nil, livenessOpts), AnomalyStuck)
	// another fault in that stretch explains it; the leave's own does not
	pause := []Window{{Start: ms(1100), Duration: ms(200), Fault: FaultPauseRedis}}
	r := CheckLiveness(leaverHistory("cancel", true, 1400, 3000), pause, livenessOpts)
	wantNoAnomalies(t, r)
	if n := caseNotes(r); len(n) != 1 || !strings.Contains(n[0], "pause-redis") {
		t.Fatalf("notes %q", r.Notes)
	}
	own := []Window{{Start: ms(900), Duration: ms(500), Fault: FaultLeaveQueue}}
	wantOneAnomaly(t, CheckLiveness(leaverHistory("cancel", true, 1400, 3000), own, livenessOpts), AnomalyStuck)
}

func TestLivenessUndecided(t *testing.T) {
	r := CheckLiveness(leaverHistory("cancel", true, 0, 1200), nil, livenessOpts)
	wantNoAnomalies(t, r)
	if r.Skipped != 1 || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "undecided") {
		t.Fatalf("skipped %d notes %q", r.Skipped, r.Notes)
	}
}

func TestLivenessHandedToGhost(t *testing.T) {
	ghost := func(h History, first, last int) History {
		h.Leaves[0].Seen = []Seen{
			{Holder: "a", Seq: 1, First: ms(900), Last: ms(985)}, // a client's: known
			{Holder: "ghost", Seq: 2, First: ms(first), Last: ms(last)},
		}
		return h
	}
	// a clean leaver (cancel or SIGTERM, then Close) must take its ticket
	for _, how := range []string{"cancel", "sigterm"} {
		a := wantOneAnomaly(t, CheckLiveness(ghost(leaverHistory(how, true, 1110, 3000), 1005, 1100), nil, livenessOpts), AnomalyHandedToGhost)
		if !strings.Contains(a.Detail, "token 2") {
			t.Fatalf("detail %q", a.Detail)
		}
	}
	// killed, or gone without waiting for its leave: noted, not counted
	for _, h := range []History{
		ghost(leaverHistory("kill", true, 1110, 3000), 1005, 1100),
		ghost(leaverHistory("cancel", false, 1110, 3000), 1005, 1100),
	} {
		r := CheckLiveness(h, nil, livenessOpts)
		wantNoAnomalies(t, r)
		if n := caseNotes(r); len(n) != 1 || !strings.Contains(n[0], "not counted") {
			t.Fatalf("notes %q", r.Notes)
		}
	}
	// the lock handed to a frozen waiter (another fault's) is its, not the
	// leaver's
	h := ghost(leaverHistory("cancel", true, 1110, 3000), 1005, 1100)
	h.Frozen = []Frozen{{Client: 16, Lock: "L", Stopped: ms(900), Thawed: ms(1200), Handed: Seen{Holder: "ghost", Seq: 2, First: ms(1005), Last: ms(1100)}}}
	wantNoAnomalies(t, CheckLiveness(h, nil, livenessOpts))
	// a moment's holder (a lock passed on by a leave), or one gone before
	// the leaver was, is no ghost
	for _, s := range [][2]int{{1005, 1010}, {950, 999}} {
		wantNoAnomalies(t, CheckLiveness(ghost(leaverHistory("cancel", true, 1110, 3000), s[0], s[1]), nil, livenessOpts))
	}
}

// A holder no client has is put down to the last waiter that left the
// lock before it was first read, once.
func TestLivenessGhostToLastLeaver(t *testing.T) {
	h := leaverHistory("cancel", true, 1010, 3000)
	h.Leases = append(h.Leases, Lease{ID: 2, Client: 1, Lock: "L", Token: Token{Key: "L", Seq: 9, Holder: "late"},
		Start: ms(1800), Deadline: ms(1900), Released: ms(1850)})
	h.Leaves = append(h.Leaves, Leave{ID: 1, Client: 10, Lock: "L", How: "kill", Queued: ms(1400), Left: ms(1500), Gone: ms(1510)})
	g := Seen{Holder: "ghost", Seq: 5, First: ms(1520), Last: ms(1790)}
	h.Leaves[0].Seen = []Seen{g} // both watches saw it
	h.Leaves[1].Seen = []Seen{g}
	r := CheckLiveness(h, nil, livenessOpts)
	wantNoAnomalies(t, r)
	if n := caseNotes(r); len(n) != 1 || !strings.Contains(n[0], "waiter 10 (kill)") {
		t.Fatalf("notes %q: want the ghost put down to waiter 10 alone", r.Notes)
	}
}
