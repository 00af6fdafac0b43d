package model

// Canonical form. Two states that no future step can tell apart should be
// one state, or the search repeats itself: expired keys are removed (as
// Redis does), timers and deadlines already past collapse to 0, messages
// and replies nobody can read any more are dropped, send times nobody can
// refer to any more are forgotten, and the in-flight sets are sorted.

func (m *machine) canon(s *state) {
	now, v := s.now, &s.srv
	for i := range m.cfg.slots() {
		l := &v.slot[i]
		if l.holder != noHolder && l.exp <= now {
			l.clear()
		}
		if l.holder == noHolder {
			s.strand[i] = -1
		}
		if l.hasCtr && l.ctrExp != 0 && l.ctrExp <= now {
			l.hasCtr, l.ctr, l.ctrExp = false, 0, 0
		}
	}
	if v.permitsExp != 0 && v.permitsExp <= now {
		v.permits, v.permitsExp = 0, 0
	}
	if v.nq > 0 && v.queueExp <= now {
		v.nq, v.queue = 0, [maxQueue]ticket{}
	}
	if v.nq == 0 {
		v.queueExp = 0
	}
	for i := 0; i < int(v.nq); i++ {
		if t := &v.queue[i]; t.exp != 0 && t.exp <= now {
			t.exp, t.attempt = 0, 0 // keeps its place; a renewal sets both again
		}
	}

	for i := 0; i < int(s.nMsg); {
		// A plain wake-up is dropped with the wait it was for (notify
		// drains it when the try wins, the Acquire ends, or its tries do).
		if h := s.msgs[i].holder; !m.takes(s, h/8, h) || s.msgs[i].plain() && !m.listens(&s.cl[h/8]) {
			s.delMsg(i)
		} else {
			i++
		}
	}
	for c := 0; c < m.cfg.Clients; c++ {
		if cl := &s.cl[c]; cl.phase == holding && cl.deadline != 0 && cl.deadline <= now {
			cl.seq, cl.deadline, cl.epoch = 0, 0, 0 // lost: only a release is left to do
		}
		if cl := &s.cl[c]; cl.phase != holding || cl.deadline == 0 {
			cl.claim, cl.confirm = noClaim, 0 // nothing left to confirm
		}
	}
	for i := 0; i < int(s.nRep); {
		if !m.awaits(s, s.reps[i]) {
			s.delRep(i)
		} else {
			i++
		}
	}

	quiet := s.nReq == 0
	for c := 0; c < m.cfg.Clients; c++ {
		cl := &s.cl[c]
		if cl.phase == waiting && cl.timer != 0 && cl.timer <= now {
			cl.timer = 0
		}
		if cl.phase != idle && cl.phase != gone && cl.phase != dead {
			quiet = false
		}
		m.forget(s, int8(c))
	}
	switch {
	case !quiet:
		s.quiet = -1
	case s.quiet < 0:
		s.quiet = now
	}
	if m.cfg.sem() {
		m.untaken(s)
	}
	if m.cfg.shrinks() {
		for i := m.cfg.NewPermits; i < m.cfg.Permits; i++ {
			switch {
			case v.permits == 0 || int(v.permits) > i:
				s.surplus &^= 1 << i
			case v.slot[i].holder == noHolder:
				s.surplus |= 1 << i
			}
		}
	}

	sortSlice(s.reqs[:s.nReq], lessReq)
	sortSlice(s.reps[:s.nRep], lessRep)
	sortSlice(s.msgs[:s.nMsg], lessMsg)
}

// forget clears the send times of client c's attempts that nothing can
// refer to any more: not its current try, nor a live ticket, nor a
// message it may still read.
func (m *machine) forget(s *state, c int8) {
	cl := &s.cl[c]
	var keep uint32
	if cl.phase == trying || cl.phase == waiting {
		keep |= 1 << (cl.attempts - 1)
	}
	for i := 0; i < int(s.srv.nq); i++ {
		if t := &s.srv.queue[i]; t.exp != 0 && t.attempt > 0 && m.takes(s, c, t.holder) {
			keep |= 1 << (t.attempt - 1)
		}
	}
	for i := 0; i < int(s.nMsg); i++ {
		if msg := &s.msgs[i]; msg.attempt > 0 && m.takes(s, c, msg.holder) {
			keep |= 1 << (msg.attempt - 1)
		}
	}
	for a := 0; a < int(cl.attempts); a++ {
		if keep&(1<<a) == 0 {
			cl.sent[a] = 0
		}
	}
	if cl.phase != waiting {
		cl.timer = 0
	}
}

func sortSlice[T any](x []T, less func(a, b *T) bool) {
	for i := 1; i < len(x); i++ {
		for j := i; j > 0 && less(&x[j], &x[j-1]); j-- {
			x[j], x[j-1] = x[j-1], x[j]
		}
	}
}

func lessReq(a, b *request) bool {
	if a.client != b.client {
		return a.client < b.client
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.acq != b.acq {
		return a.acq < b.acq
	}
	if a.attempt != b.attempt {
		return a.attempt < b.attempt
	}
	if a.slot != b.slot {
		return a.slot < b.slot
	}
	return a.seq < b.seq
}

func lessRep(a, b *reply) bool { return a.client < b.client }

func lessMsg(a, b *message) bool {
	if a.holder != b.holder {
		return a.holder < b.holder
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	if a.attempt != b.attempt {
		return a.attempt < b.attempt
	}
	if a.slot != b.slot {
		return a.slot < b.slot
	}
	return a.epoch < b.epoch
}
