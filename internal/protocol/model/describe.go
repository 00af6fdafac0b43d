package model

import "strings"

// Human-readable traces: one line per step with the tick, the actor, what
// it did (with what the server answered), and a summary of the state
// after it.

func clientName(c int8) string { return string(rune('A' + c)) }

func (m *machine) holderName(h int8) string {
	if h == noHolder {
		return "-"
	}
	if m.cfg.ReuseHolder {
		return clientName(h / 8)
	}
	return clientName(h/8) + sprintf("%d", h%8)
}

func (m *machine) reqString(r request) string {
	h := m.holderName(r.holder)
	switch r.kind {
	case reqTry:
		if m.cfg.shrinks() {
			return sprintf("try(%s #%d N=%d)", h, r.attempt, m.cfg.permitsOf(int(r.client)))
		}
		return sprintf("try(%s #%d)", h, r.attempt)
	case reqRelease:
		return sprintf("release(%s%s)", h, m.atSlot(r.slot))
	case reqLeave:
		return sprintf("leave(%s)", h)
	case reqConfirm:
		return sprintf("confirm(%s:%d%s)", h, r.seq, m.atSlot(r.slot))
	}
	if m.cfg.Variant == Fixed && !m.cfg.RefreshByHolder {
		return sprintf("refresh(%s:%d%s)", h, r.seq, m.atSlot(r.slot))
	}
	return sprintf("refresh(%s%s)", h, m.atSlot(r.slot))
}

// atSlot is " @i" for a semaphore's slot i, "" for the lock.
func (m *machine) atSlot(i int8) string {
	if m.cfg.sem() {
		return sprintf(" @%d", i)
	}
	return ""
}

func (m *machine) msgString(msg message) string {
	if msg.plain() {
		return sprintf("wake-up(%s)", m.holderName(msg.holder))
	}
	if m.cfg.Variant == Old {
		return sprintf("handoff(%s:%d)", m.holderName(msg.holder), msg.seq)
	}
	return sprintf("handoff(%s:%d #%d%s)", m.holderName(msg.holder), msg.seq, msg.attempt, m.atSlot(msg.slot))
}

func (m *machine) repString(r reply) string {
	switch r.kind {
	case repAcquired:
		return sprintf("acquired %d%s", r.seq, m.atSlot(r.slot))
	case repReacquired:
		return sprintf("reacquired %d%s", r.seq, m.atSlot(r.slot))
	case repHeld:
		return sprintf("held pttl=%d", r.pttl)
	case repQueued:
		return "queued"
	case repRefreshed:
		return "refreshed"
	case repConfirmed:
		return "confirmed"
	case repConfirmFailed:
		return "confirm failed"
	}
	return "refresh failed"
}

// describe names the actor and the action a in state s (before it).
func (m *machine) describe(s *state, a action) (actor, what string) {
	switch a.kind {
	case aTick:
		return "clock", "tick"
	case aRestart:
		return "redis", "restart: every key lost"
	case aAdvance:
		return "admin", sprintf("advance to %d", m.advanceFloor(s, a.idx))
	case aServe:
		r := s.reqs[a.idx]
		return "redis", "runs " + m.reqString(r)
	case aLose:
		return "net", "loses " + m.msgString(s.msgs[a.idx])
	case aDup:
		return "net", "duplicates " + m.msgString(s.msgs[a.idx])
	}
	cl := &s.cl[a.who]
	actor = clientName(a.who)
	switch a.kind {
	case aStart:
		what = sprintf("Acquire #%d: sends try #%d", cl.acq+1, cl.attempts+1)
	case aReply:
		what = "reads " + m.repString(s.reps[s.replyFor(a.who)])
	case aTimer:
		what = sprintf("timer fires: sends try #%d", cl.attempts+1)
	case aRead:
		what = "reads " + m.msgString(s.msgs[a.idx])
	case aGiveUp:
		what = "gives up: sends leave"
	case aExit:
		what = "gives up and exits: no leave"
	case aDie:
		what = "is killed"
	case aRelease:
		what = "sends release"
	case aConfirm:
		what = "sends confirm (refresh to the ttl)"
	}
	return actor, what
}

// outcome says what a server step answered, read off the state after it.
func (m *machine) outcome(before, after *state, a action) string {
	if a.kind != aServe {
		return ""
	}
	r := before.reqs[a.idx]
	var out string
	if r.kind == reqTry || r.kind == reqRefresh || r.kind == reqConfirm {
		out = " -> " + m.repString(m.last)
		switch cl := &after.cl[r.client]; {
		case after.replyFor(r.client) >= 0:
		case cl.phase == waiting && cl.acq == r.acq && before.cl[r.client].phase == trying:
			out += sprintf(", read at once: %s waits", clientName(r.client))
		default:
			out += " (nobody waits for it)"
		}
	}
	hs := m.handoffs(before, after, r)
	for _, msg := range hs {
		out += sprintf(", hands %s to %s, publishes %s", m.slotName(int(msg.slot)), m.holderName(msg.holder), m.msgString(msg))
	}
	if r.kind == reqTry || r.kind == reqRefresh || r.kind == reqConfirm {
		return out
	}
	if len(hs) > 0 {
		return " ->" + out[1:]
	}
	for i := range m.cfg.slots() {
		if before.srv.slot[i].holder == r.holder && after.srv.slot[i].holder == noHolder {
			switch {
			case m.woke:
				return sprintf(" -> slot %d deleted: no permits key; publishes a wake-up", i)
			case !m.cfg.sem():
			case after.srv.permits == 0:
				return sprintf(" -> slot %d deleted: no permits key, nobody queued", i)
			case i >= int(after.srv.permits):
				return sprintf(" -> slot %d deleted: at or past the N of %d", i, after.srv.permits)
			}
			return " -> " + m.slotName(i) + " deleted"
		}
	}
	return " -> " + m.slotName(int(r.slot)) + " not " + m.holderName(r.holder) + "'s: nothing released"
}

// handoffs are the messages server step r published, read off the slots
// before and after it: each slot whose key went to a holder id other than
// the step's own (a try's own slot is its reply), in the order of the
// slots, which is the order of publishing.
func (m *machine) handoffs(before, after *state, r request) []message {
	var out []message
	for i := range m.cfg.slots() {
		b, a := &before.srv.slot[i], &after.srv.slot[i]
		if a.holder == noHolder || a.holder == b.holder && a.seq == b.seq || a.holder == r.holder {
			continue
		}
		out = append(out, message{holder: a.holder, seq: a.seq, attempt: m.handedAttempt(before, a.holder), epoch: after.srv.epoch, slot: int8(i)})
	}
	return out
}

// handedAttempt is the attempt of h's ticket in s (Fixed's message
// carries it), for describing a handoff whose message was dropped.
func (m *machine) handedAttempt(s *state, h int8) int8 {
	if i := s.srv.enqueued(h); i >= 0 && m.cfg.Variant == Fixed {
		return s.srv.queue[i].attempt
	}
	return 0
}

// summary is the state after a step, in one line.
func (m *machine) summary(s *state) string {
	var b strings.Builder
	v := &s.srv
	if !m.cfg.sem() {
		if l := &v.slot[0]; l.holder == noHolder {
			b.WriteString("lock=none")
		} else {
			b.WriteString(sprintf("lock=%s:%d exp t%d", m.holderName(l.holder), l.seq, l.exp))
		}
		if l := &v.slot[0]; l.hasCtr {
			b.WriteString(sprintf(" ctr=%d", l.ctr))
		}
	} else {
		b.WriteString(sprintf("p=%d", v.permits))
		if v.permitsExp != 0 {
			b.WriteString(sprintf(" exp t%d", v.permitsExp))
		}
		for i, l := range v.slot[:m.cfg.slots()] {
			b.WriteString(sprintf(" @%d=", i))
			if l.holder == noHolder {
				b.WriteString("none")
			} else {
				b.WriteString(sprintf("%s:%d exp t%d", m.holderName(l.holder), l.seq, l.exp))
			}
			if l.hasCtr {
				b.WriteString(sprintf(" ctr=%d", l.ctr))
			}
		}
	}
	if v.nq > 0 {
		b.WriteString(" q=[")
		for i, t := range v.queue[:v.nq] {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(m.holderName(t.holder))
			if t.exp == 0 {
				b.WriteString("(expired)")
			} else if t.attempt > 0 {
				b.WriteString(sprintf("(t%d #%d)", t.exp, t.attempt))
			} else {
				b.WriteString(sprintf("(t%d)", t.exp))
			}
		}
		b.WriteByte(']')
	}
	b.WriteString(" |")
	for c := 0; c < m.cfg.Clients; c++ {
		b.WriteString(" " + clientName(int8(c)) + ":" + m.clientString(&s.cl[c]))
	}
	var net []string
	for _, r := range s.reqs[:s.nReq] {
		net = append(net, m.reqString(r))
	}
	for _, r := range s.reps[:s.nRep] {
		net = append(net, clientName(r.client)+"<-"+m.repString(r))
	}
	for _, msg := range s.msgs[:s.nMsg] {
		net = append(net, m.msgString(msg))
	}
	if len(net) > 0 {
		b.WriteString(" | net: " + strings.Join(net, ", "))
	}
	return b.String()
}

func (m *machine) clientString(cl *client) string {
	switch cl.phase {
	case idle:
		return "idle"
	case trying:
		return sprintf("try#%d", cl.attempts)
	case waiting:
		if cl.timer != 0 {
			return sprintf("wait(timer t%d)", cl.timer)
		}
		return "wait"
	case refreshing:
		return sprintf("refresh(%d)", cl.seq)
	case holding:
		if cl.deadline == 0 {
			return "lost"
		}
		lease := sprintf("%d", cl.seq)
		if m.cfg.sem() {
			lease = sprintf("@%d:%d", cl.slot, cl.seq)
		}
		if cl.claim != noClaim {
			return sprintf("HOLDS(%s until t%d, claim)", lease, cl.deadline)
		}
		return sprintf("HOLDS(%s until t%d)", lease, cl.deadline)
	case gone:
		return "gone"
	}
	return "dead"
}

// trace replays path from the initial state into readable steps.
func (m *machine) trace(path []action) []Step {
	s := m.initial()
	steps := make([]Step, 0, len(path))
	for _, a := range path {
		actor, what := m.describe(&s, a)
		next, _ := m.apply(s, a)
		what += m.outcome(&s, &next, a)
		steps = append(steps, Step{Tick: int(next.now), Actor: actor, Action: what, State: m.summary(&next)})
		s = next
	}
	return steps
}
