package model

// The properties checked in every state a search or walk reaches (check),
// and what they read of the state.

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
