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
		return sprintf("try(%s #%d)", h, r.attempt)
	case reqRelease:
		return sprintf("release(%s)", h)
	case reqLeave:
		return sprintf("leave(%s)", h)
	case reqConfirm:
		return sprintf("confirm(%s:%d)", h, r.seq)
	}
	if m.cfg.Variant == Fixed && !m.cfg.RefreshByHolder {
		return sprintf("refresh(%s:%d)", h, r.seq)
	}
	return sprintf("refresh(%s)", h)
}

func (m *machine) msgString(msg message) string {
	if m.cfg.Variant == Old {
		return sprintf("handoff(%s:%d)", m.holderName(msg.holder), msg.seq)
	}
	return sprintf("handoff(%s:%d #%d)", m.holderName(msg.holder), msg.seq, msg.attempt)
}

func repString(r reply) string {
	switch r.kind {
	case repAcquired:
		return sprintf("acquired %d", r.seq)
	case repReacquired:
		return sprintf("reacquired %d", r.seq)
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
		what = "reads " + repString(s.reps[s.replyFor(a.who)])
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
	if r.kind == reqTry || r.kind == reqRefresh || r.kind == reqConfirm {
		out := " -> " + repString(m.last)
		switch cl := &after.cl[r.client]; {
		case after.replyFor(r.client) >= 0:
		case cl.phase == waiting && cl.acq == r.acq && before.cl[r.client].phase == trying:
			out += sprintf(", read at once: %s waits", clientName(r.client))
		default:
			out += " (nobody waits for it)"
		}
		return out
	}
	if h := after.srv.holder; h != noHolder && h != before.srv.holder {
		return sprintf(" -> hands off to %s, publishes %s", m.holderName(h),
			m.msgString(message{holder: h, seq: after.srv.seq, attempt: m.handedAttempt(before, h), epoch: after.srv.epoch}))
	}
	if before.srv.holder == r.holder && after.srv.holder == noHolder {
		return " -> lock deleted"
	}
	return " -> lock not " + m.holderName(r.holder) + "'s: nothing released"
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
	if v.holder == noHolder {
		b.WriteString("lock=none")
	} else {
		b.WriteString(sprintf("lock=%s:%d exp t%d", m.holderName(v.holder), v.seq, v.exp))
	}
	if v.hasCtr {
		b.WriteString(sprintf(" ctr=%d", v.ctr))
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
		net = append(net, clientName(r.client)+"<-"+repString(r))
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
		if cl.claim != noClaim {
			return sprintf("HOLDS(%d until t%d, claim)", cl.seq, cl.deadline)
		}
		return sprintf("HOLDS(%d until t%d)", cl.seq, cl.deadline)
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
