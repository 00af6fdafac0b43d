package model

import "fmt"

var sprintf = fmt.Sprintf

// machine is a checked configuration: the step relation and the
// properties over it.
type machine struct {
	cfg    Config
	last   reply // the last script reply serve made, for describing a trace
	woke   bool  // the last server step published a plain wake-up
	events [nEvents]int
}

// Events counted over a search, so a test can see that the paths it
// means to check were taken at all.
type event uint8

const (
	evTryLease        event = iota // a try's reply gave a lease
	evHandoffLease                 // a handoff message gave a lease without a refresh
	evRefreshSent                  // a handoff left under half the ttl: refresh first
	evRefreshLease                 // that refresh succeeded
	evRefreshFailed                // that refresh failed: the waiter tries again
	evOtherAcquire                 // Fixed ignored a handoff to an earlier Acquire
	evDeadOnArrival                // a lease was past its deadline when returned
	evHandoff                      // a release or leave handed the lock to the queue's head
	evClaimLease                   // a handoff gave a lease on the claim window only
	evConfirmSent                  // a claimed lease sent its confirm
	evConfirmed                    // the confirm moved the deadline to the whole ttl
	evConfirmFailed                // the confirm found the lock gone: the lease is lost
	evHandToDead                   // a handoff went to a holder id no live Acquire can take
	evDrain                        // a semaphore's try that took a slot handed a free one on
	evSurplus                      // a semaphore's release deleted a slot at or past the permits key's N
	evPastN                        // a semaphore's try re-acquired, or its leave let go of, a slot past its client's N
	evWake                         // a semaphore's release or leave found no permits key: slot deleted, waiters woken
	evWakeRead                     // a waiter read a plain wake-up and tried again
	evReservedHandoff              // a try found the lock (a slot) free and reserved: it handed it to the live head
	nEvents
)

var eventNames = [nEvents]string{"try lease", "handoff lease", "handoff refresh", "refresh lease",
	"refresh failed", "earlier acquire's handoff", "dead on arrival", "handoff",
	"claim lease", "confirm", "confirmed", "confirm failed", "handoff to the dead", "drain handoff", "surplus deleted",
	"slot past N", "wake-up", "wake-up read", "reserved handoff"}

func (m *machine) note(e event) { m.events[e]++ }

type violation struct {
	prop Property
	what string
}

type actKind uint8

const (
	aTick    actKind = iota // time passes (every paused client stays put)
	aRestart                // the server comes back empty
	aAdvance                // Advance(floor): idx 0 the highest issued seq, 1 the clock + AdvanceAhead
	aServe                  // the server runs request idx
	aLose                   // handoff message idx is lost
	aDup                    // handoff message idx is delivered twice
	aStart                  // client starts an Acquire (its first try)
	aReply                  // client reads its reply
	aTimer                  // client's timer fires: the next try
	aRead                   // client reads handoff message idx
	aGiveUp                 // client's context ends: it leaves
	aExit                   // client exits without leaving (Old)
	aDie                    // client is SIGKILLed
	aRelease                // client releases its lease
	aConfirm                // client's claimed lease sends its confirm
)

// action is one step: what happens, to whom, and which in-flight item.
type action struct {
	kind actKind
	who  int8
	idx  int8
}

// actions appends the steps enabled in s, in a fixed order, to out.
func (m *machine) actions(s *state, out []action) []action {
	c := &m.cfg
	if int(s.now) < c.Horizon {
		out = append(out, action{kind: aTick})
	}
	if int(s.restarts) < c.Restarts && !s.srv.down {
		out = append(out, action{kind: aRestart})
	}
	if int(s.advances) < c.Advances {
		if s.issued[0] > 0 {
			out = append(out, action{kind: aAdvance, idx: 0})
		}
		if c.AdvanceAhead > 0 {
			out = append(out, action{kind: aAdvance, idx: 1})
		}
	}
	for i := 0; i < int(s.nReq) && !s.srv.down; i++ {
		if i == 0 || s.reqs[i] != s.reqs[i-1] { // equal requests: one choice
			out = append(out, action{kind: aServe, idx: int8(i)})
		}
	}
	for i := 0; i < int(s.nMsg); i++ {
		if i > 0 && s.msgs[i] == s.msgs[i-1] {
			continue
		}
		if int(s.losses) < c.Losses {
			out = append(out, action{kind: aLose, idx: int8(i)})
		}
		if int(s.dups) < c.Duplicates && int(s.nMsg) < maxMsgs && !s.msgs[i].plain() {
			out = append(out, action{kind: aDup, idx: int8(i)})
		}
	}
	for ci := 0; ci < c.Clients; ci++ {
		cl, who := &s.cl[ci], int8(ci)
		canLeave := int(s.leaves) < c.Leaves
		switch cl.phase {
		case idle:
			if int(cl.acq) < c.Acquisitions && !(c.ReuseHolder && s.releasing(who)) {
				out = append(out, action{kind: aStart, who: who})
			}
		case trying, refreshing:
			if s.replyFor(who) >= 0 {
				out = append(out, action{kind: aReply, who: who})
			}
		case waiting:
			if cl.timer == 0 && int(cl.tries) < c.MaxTries {
				out = append(out, action{kind: aTimer, who: who})
			}
			h := m.holderOf(who, cl.acq)
			for i := 0; i < int(s.nMsg); i++ {
				if s.msgs[i].holder == h && (i == 0 || s.msgs[i] != s.msgs[i-1]) {
					out = append(out, action{kind: aRead, who: who, idx: int8(i)})
				}
			}
		case holding:
			out = append(out, action{kind: aRelease, who: who})
			if cl.claim == claimed {
				out = append(out, action{kind: aConfirm, who: who})
			}
			if s.replyFor(who) >= 0 {
				out = append(out, action{kind: aReply, who: who})
			}
		}
		switch cl.phase {
		case trying, waiting, refreshing:
			if canLeave {
				out = append(out, action{kind: aGiveUp, who: who})
				if c.Variant == Old {
					out = append(out, action{kind: aExit, who: who})
				}
			}
		}
		if int(s.deaths) < c.Deaths && cl.phase != idle && cl.phase != gone && cl.phase != dead {
			out = append(out, action{kind: aDie, who: who})
		}
	}
	return out
}

func (s *state) replyFor(c int8) int {
	for i := 0; i < int(s.nRep); i++ {
		if s.reps[i].client == c {
			return i
		}
	}
	return -1
}

// apply returns the state after a, in canonical form, and the violation
// of property (b) the step itself made, if any.
func (m *machine) apply(s state, a action) (state, *violation) {
	var bad *violation
	c := a.who
	switch a.kind {
	case aTick:
		if m.cfg.sem() && !m.prompt(&s) {
			s.free = [maxSlots]int16{-1, -1, -1} // a pause: the no-strand count starts again
		}
		s.now++
		s.srv.down = false
	case aRestart:
		s.restarts++
		s.restart()
	case aAdvance:
		s.advances++
		m.serverAdvance(&s, m.advanceFloor(&s, a.idx))
	case aServe:
		r := s.reqs[a.idx]
		s.delReq(int(a.idx))
		bad = m.serve(&s, r)
	case aLose:
		s.losses++
		s.delMsg(int(a.idx))
	case aDup:
		s.dups++
		s.addMsg(s.msgs[a.idx])
	case aStart:
		m.start(&s, c)
	case aReply:
		i := s.replyFor(c)
		r := s.reps[i]
		s.delRep(i)
		bad = m.readReply(&s, c, r)
	case aTimer:
		m.sendTry(&s, c)
	case aRead:
		msg := s.msgs[a.idx]
		s.delMsg(int(a.idx))
		bad = m.readHandoff(&s, c, msg)
	case aGiveUp, aExit:
		s.leaves++
		m.giveUp(&s, c, a.kind == aExit)
	case aDie:
		s.deaths++
		s.cl[c].phase = dead
	case aRelease:
		m.release(&s, c)
	case aConfirm:
		m.confirm(&s, c)
	}
	m.canon(&s)
	return s, bad
}

// advanceFloor is the floor of Advance idx: 0 the highest seq issued,
// 1 the clock plus AdvanceAhead ticks.
func (m *machine) advanceFloor(s *state, idx int8) int64 {
	if idx == 1 {
		return usOf(s.now) + int64(m.cfg.AdvanceAhead)*1000
	}
	return s.issued[0]
}

// serve runs one request on the server and puts its reply in flight, if
// its client still waits for it.
func (m *machine) serve(s *state, r request) *violation {
	var rep reply
	var bad *violation
	m.woke = false
	switch r.kind {
	case reqTry:
		rep, bad = m.serverTry(s, r)
	case reqRefresh, reqConfirm:
		rep = m.serverRefresh(s, r)
	default:
		return m.serverRelease(s, r)
	}
	m.last = rep
	if !m.awaits(s, rep) {
		return bad
	}
	if rep.kind == repHeld || rep.kind == repQueued {
		// Read at once: a waiter that read it later could do no more
		// than one that waits from now (its timer would only fire later),
		// so the search loses nothing by skipping the delay.
		return m.readReply(s, r.client, rep)
	}
	s.addRep(rep)
	return bad
}

// awaits reports whether reply r's client still waits for it: a try's or
// a handoff refresh's in the same Acquire and phase, a confirm's while the
// claimed lease it was sent for is live.
func (m *machine) awaits(s *state, r reply) bool {
	cl := &s.cl[r.client]
	if cl.acq != r.acq {
		return false
	}
	switch r.kind {
	case repRefreshed, repRefreshFailed:
		return cl.phase == refreshing
	case repConfirmed, repConfirmFailed:
		return cl.phase == holding && cl.claim == confirming && cl.deadline != 0
	}
	return cl.phase == trying
}
