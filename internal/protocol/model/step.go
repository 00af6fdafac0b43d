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

// check tests properties (a) and (c) in state s.
func (m *machine) check(s *state) *violation {
	if bad := m.exclusion(s); bad != nil {
		return bad
	}
	v := &s.srv
	for i := range m.cfg.slots() {
		if l := &v.slot[i]; s.strand[i] >= 0 && l.holder != noHolder && !m.takes(s, l.holder/8, l.holder) &&
			int(s.now) >= int(s.strand[i])+m.cfg.StrandBound {
			return &violation{Liveness, sprintf("the %s handed to %s at t=%d is still held at t=%d (until t=%d), and no live Acquire can take it",
				m.slotName(i), m.holderName(l.holder), s.strand[i], s.now, l.exp)}
		}
		if s.free[i] >= 0 && int(s.now) >= int(s.free[i])+m.cfg.FreeBound {
			return &violation{Liveness, sprintf("slot %d has waited since t=%d for the live head of the queue, %s, and is still not taken at t=%d",
				i, s.free[i], m.holderName(v.queue[m.liveTicket(s)].holder), s.now)}
		}
	}
	if s.quiet >= 0 && int(s.now) >= int(s.quiet)+m.cfg.LivenessBound {
		for i := range m.cfg.slots() {
			if h := v.slot[i].holder; h != noHolder {
				return &violation{Liveness, sprintf("all quiet since t=%d, %s still held by %s", s.quiet, m.slotName(i), m.holderName(h))}
			}
		}
		for i := 0; i < int(v.nq); i++ {
			if v.queue[i].exp != 0 {
				return &violation{Liveness, sprintf("all quiet since t=%d, %s still has a live ticket", s.quiet, m.holderName(v.queue[i].holder))}
			}
		}
	}
	return nil
}

// exclusion tests property (a): no two windows on one lock (a semaphore:
// on one slot) in one server epoch; for a semaphore, no more windows in an
// epoch than its largest N, and, once it shrank (the permits key holds
// the smaller N, and every surplus slot was let go of or free since), no
// more than the smaller N in the server's epoch; and no holder id has two
// slots at once (one Acquire, one permit: the other slot would be lost to
// the waiters until its key expires).
func (m *machine) exclusion(s *state) *violation {
	var count [maxEpochs]int
	for i := 0; i < m.cfg.Clients; i++ {
		a := &s.cl[i]
		if a.phase != holding || a.deadline == 0 {
			continue
		}
		count[a.epoch]++
		for j := i + 1; j < m.cfg.Clients; j++ {
			b := &s.cl[j]
			if b.phase == holding && b.deadline != 0 && a.epoch == b.epoch && a.slot == b.slot {
				return &violation{Exclusion, sprintf("%s holds %sseq %d until t=%d and %s holds seq %d until t=%d",
					m.holderName(m.holderOf(int8(i), a.acq)), m.slotOf(a.slot), a.seq, a.deadline,
					m.holderName(m.holderOf(int8(j), b.acq)), b.seq, b.deadline)}
			}
		}
	}
	if !m.cfg.sem() {
		return nil
	}
	v := &s.srv
	// One holder id, one slot: with one N for every client. With mixed N a
	// holder handed a slot past its N may miss it (its try looks past its
	// N only up to the permits key's N, which another client may have
	// lowered) and take a second one: the first, never confirmed, frees
	// with its claim window (docs/design.md, "Mixed N"); the leases above
	// are still checked.
	for i := range m.cfg.slots() {
		for j := i + 1; j < m.cfg.slots() && m.cfg.NewPermits == m.cfg.Permits; j++ {
			if h := v.slot[i].holder; h != noHolder && v.slot[j].holder == h {
				return &violation{Exclusion, sprintf("%s has slots %d (seq %d) and %d (seq %d) at once",
					m.holderName(h), i, v.slot[i].seq, j, v.slot[j].seq)}
			}
		}
	}
	for e, n := range count {
		if n > m.cfg.slots() {
			return &violation{Exclusion, sprintf("%d leases of epoch %d at once, over %d permits", n, e, m.cfg.slots())}
		}
	}
	if full := uint8(1<<m.cfg.Permits - 1<<m.cfg.NewPermits); m.cfg.shrinks() && int(v.permits) == m.cfg.NewPermits &&
		s.surplus == full && count[v.epoch] > m.cfg.NewPermits {
		return &violation{Exclusion, sprintf("%d leases at once after the semaphore shrank to %d permits and its slots %d..%d were let go of",
			count[s.srv.epoch], m.cfg.NewPermits, m.cfg.NewPermits, m.cfg.Permits-1)}
	}
	return nil
}

// slotName names slot i in a violation: "slot i", or the lock.
func (m *machine) slotName(i int) string {
	if m.cfg.sem() {
		return sprintf("slot %d", i)
	}
	return "lock"
}

// slotOf is "slot i " for a semaphore, "" for the lock.
func (m *machine) slotOf(i int8) string {
	if m.cfg.sem() {
		return sprintf("slot %d ", i)
	}
	return ""
}

// liveTicket is the index of the queue's first live ticket, -1 when none.
func (m *machine) liveTicket(s *state) int {
	for i := 0; i < int(s.srv.nq); i++ {
		if s.srv.queue[i].exp != 0 {
			return i
		}
	}
	return -1
}

// liveHeadWaiter is the client whose ticket is the queue's first live one
// when it is a live waiter that can still try (its Acquire's wait, tries
// left within the search's bound); -1 otherwise (nobody queued, or a
// waiter that died, left, or gave up its tries: its ticket costs the
// others its lifetime, a bound of its own).
func (m *machine) liveHeadWaiter(s *state) int8 {
	i := m.liveTicket(s)
	if i < 0 {
		return -1
	}
	h := s.srv.queue[i].holder
	c := h / 8
	cl := &s.cl[c]
	if !m.takes(s, c, h) || !(cl.phase == trying || cl.phase == waiting && int(cl.tries) < m.cfg.MaxTries) {
		return -1
	}
	return c
}

// untaken updates the ghost of the semaphore's no-strand property: slot i
// waits for the live head of the queue while it is free, or held by a
// holder id that no live Acquire can take (handed to a waiter that died,
// for the claim window), and the live head is a waiter that can take it
// (its N above i). It counts from when that began, or from the last
// handoff of the slot, or from the last pause (see prompt).
func (m *machine) untaken(s *state) {
	head := m.liveHeadWaiter(s)
	for i := range m.cfg.slots() {
		l := &s.srv.slot[i]
		waits := head >= 0 && i < int(s.cl[head].n) &&
			(l.holder == noHolder || s.strand[i] >= 0 && !m.takes(s, l.holder/8, l.holder))
		switch {
		case !waits:
			s.free[i] = -1
		case s.free[i] < 0:
			s.free[i] = s.now
		}
	}
}

// prompt reports whether nothing is pending that time should wait for: no
// request or reply in flight, no waiter whose timer is due or that has a
// handoff message to read. Time passing in a state that is not prompt is
// a pause of a client, the network or the server, which no bound on
// taking a free slot can cover: the count starts again.
func (m *machine) prompt(s *state) bool {
	if s.nReq > 0 || s.nRep > 0 {
		return false
	}
	for c := range m.cfg.Clients {
		cl := &s.cl[c]
		if cl.phase != waiting {
			continue
		}
		if cl.timer == 0 && int(cl.tries) < m.cfg.MaxTries {
			return false
		}
		h := m.holderOf(int8(c), cl.acq)
		for _, msg := range s.msgs[:s.nMsg] {
			if msg.holder == h {
				return false
			}
		}
	}
	return true
}
