package model

// The server side: one Redis running the fair lock's (or a semaphore's)
// scripts atomically.
// Each function is the script named in its comment, reduced to what the
// model observes. The clock is now*1000 "µs", so that INCR, which adds 1
// per acquisition, never overtakes the clock by itself.

// usOf is the server clock at tick t, in µs.
func usOf(t int16) int64 { return int64(t) * 1000 }

// serverTry is acquire_fair.lua with an attempt (a waiting try), and for a
// semaphore sem_acquire.lua, which is the same on N slots: the holder's
// slot is re-acquired; with none free, the try queues; a free slot goes
// to the queue's live head (or anyone, with nobody queued): another's try
// queues and hands it to the head, the head's takes it and hands every
// other free slot below its N to the next live waiters. The
// lock is a semaphore of one slot that writes no permits key.
//
// A semaphore's try writes its N into the permits key when the key holds
// another or is missing, with the counter's ttl, and looks for the
// holder's slot past its N too, up to the N the key held before (a slot a
// client with a larger N handed over, or took for this holder id).
func (m *machine) serverTry(s *state, r request) (reply, *violation) {
	v := &s.srv
	n := int(s.cl[r.client].n)
	rep := reply{client: r.client, acq: r.acq, epoch: v.epoch}
	scan := n
	if m.cfg.sem() {
		scan = max(n, int(v.permits)) // own_slot: up to the N read before the write
		if v.permits != int8(n) {
			v.permits, v.permitsExp = int8(n), m.counterExpiry(s)
		}
	}
	free := -1
	for i := range scan {
		l := &v.slot[i]
		if l.holder == r.holder { // re-acquire: also a handoff whose message was lost
			l.exp = s.now + int16(m.cfg.TTL)
			s.strand[i] = -1 // a try from the holder id: its ttl, as a holder's
			if j := v.enqueued(r.holder); j >= 0 {
				v.dequeue(j)
			}
			if i >= n {
				m.note(evPastN)
			}
			rep.kind, rep.seq, rep.slot = repReacquired, l.seq, int8(i)
			return rep, nil
		}
		if l.holder == noHolder && free < 0 && i < n {
			free = i
		}
	}
	if free < 0 {
		m.enqueue(s, r.holder, r.attempt)
		rep.kind, rep.pttl = repHeld, v.slot[0].exp-s.now
		for _, l := range v.slot[1:n] {
			rep.pttl = min(rep.pttl, l.exp-s.now)
		}
		return rep, nil
	}
	if m.liveHead(s) {
		if v.queue[0].holder != r.holder {
			m.enqueue(s, r.holder, r.attempt)
			rep.kind = repQueued
			if m.cfg.Variant == Fixed {
				// The free slot is the live head's: the try hands it
				// over, as a release would (acquire_fair.lua,
				// sem_acquire_queued.lua).
				m.note(evReservedHandoff)
				return rep, m.handOff(s, free)
			}
			return rep, nil
		}
		v.dequeue(0)
	}
	l := &v.slot[free]
	seq := m.nextSeq(s, free)
	bad := m.issue(s, free, seq)
	l.holder, l.seq, l.exp = r.holder, seq, s.now+int16(m.cfg.TTL)
	s.strand[free] = -1
	rep.kind, rep.seq, rep.slot = repAcquired, seq, int8(free)
	for i := free + 1; i < n && v.nq > 0; i++ {
		if v.slot[i].holder == noHolder {
			m.note(evDrain)
			if b := m.handOff(s, i); bad == nil {
				bad = b
			}
		}
	}
	return rep, bad
}

// serverRelease is release_fair.lua (with the request's
// slot), and leave.lua (sem_leave.lua) when leave is "1" (a waiter that
// gives up: dequeue, then release what was handed to it) or, with
// ReuseHolder, "2" (dequeue only: the lock may be one the same holder id
// got in an earlier Acquire). A semaphore's leave looks for the holder's
// slot among the first max(N, permits key's) slots, and passes it on as
// a release does (passSlot).
func (m *machine) serverRelease(s *state, r request) *violation {
	v := &s.srv
	i := int(r.slot)
	if r.kind == reqLeave {
		if j := v.enqueued(r.holder); j >= 0 {
			v.dequeue(j)
		}
		if m.cfg.ReuseHolder {
			return nil
		}
		if i = m.heldSlot(s, r.holder, max(int(s.cl[r.client].n), int(v.permits))); i < 0 {
			return nil
		}
		if i >= int(s.cl[r.client].n) {
			m.note(evPastN)
		}
	}
	if v.slot[i].holder != r.holder {
		return nil
	}
	v.slot[i].clear()
	if !m.cfg.sem() {
		return m.handOff(s, i)
	}
	return m.passSlot(s, i, r.kind == reqRelease)
}

// heldSlot is the first of slots 0..n-1 that holder h has, -1 when none.
func (m *machine) heldSlot(s *state, h int8, n int) int {
	for i := range n {
		if s.srv.slot[i].holder == h {
			return i
		}
	}
	return -1
}

// passSlot is permit.lua's pass_slot on slot i, which a release or leave
// has just let go of. Below the permits key's N the slot is handed on; at
// or past it, deleted (the semaphore shrank). With the key missing (it
// lapsed a counter ttl after the last try that wrote it, or a restart lost
// it) the slot is deleted and every waiter woken, handed nothing: their
// tries take the slot in the queue's order, and write N again. A release
// with nobody queued takes release_fair.lua's short path: it deletes the
// slot and tells no one.
func (m *machine) passSlot(s *state, i int, release bool) *violation {
	v := &s.srv
	switch {
	case v.permits == 0:
		if !release || v.nq > 0 {
			m.wake(s)
		}
		return nil
	case i >= int(v.permits):
		s.surplus |= 1 << i // let go of after the semaphore shrank below it
		if !m.cfg.HandSurplus {
			m.note(evSurplus)
			return nil
		}
	}
	return m.handOff(s, i)
}

// wake publishes a plain wake-up: each client whose Acquire listens (it
// tries, waits or refreshes a handoff, with tries left to make) gets it,
// and tries again at once when it reads it (wait.go: a wake-up that hands
// nothing over). A waiter that has one pending gets no second: notify
// keeps one wake-up per waiter.
func (m *machine) wake(s *state) {
	m.note(evWake)
	m.woke = true
	for c := range int8(m.cfg.Clients) {
		cl := &s.cl[c]
		if !m.listens(cl) {
			continue
		}
		msg := message{holder: m.holderOf(c, cl.acq), epoch: s.srv.epoch}
		pending := false
		for _, x := range s.msgs[:s.nMsg] {
			pending = pending || x.plain() && x.holder == msg.holder
		}
		if !pending {
			s.addMsg(msg)
		}
	}
}

// listens reports whether cl's Acquire would act on a plain wake-up: it is
// in its wait loop, with a try left to make (a bound of the search).
func (m *machine) listens(cl *client) bool {
	return (cl.phase == trying || cl.phase == waiting || cl.phase == refreshing) && int(cl.tries) < m.cfg.MaxTries
}

// handOff is handoff.lua's hand_off on slot i, which is free: it goes to
// the queue's live head for the claim window, min(TTL, TicketTTL), as the
// ticket says; the waiter's first refresh extends it to its ttl, and a
// waiter that died never refreshes, so the slot frees when the claim runs
// out. With nobody live in the queue it stays free.
func (m *machine) handOff(s *state, i int) *violation {
	v := &s.srv
	if !m.liveHead(s) {
		return nil // every fair waiter is queued: nobody to wake
	}
	head := v.queue[0]
	ctr := i
	if m.cfg.SharedCounter {
		ctr = 0
	}
	seq := m.nextSeq(s, ctr)
	bad := m.issue(s, i, seq)
	l := &v.slot[i]
	l.holder, l.seq, l.exp = head.holder, seq, s.now+int16(m.cfg.claim())
	s.strand[i], s.free[i] = s.now, -1
	v.dequeue(0)
	m.note(evHandoff)
	if !m.takes(s, head.holder/8, head.holder) {
		m.note(evHandToDead)
	}
	s.addMsg(message{holder: head.holder, seq: seq, attempt: head.attempt, epoch: v.epoch, slot: int8(i)})
	return bad
}

// serverRefresh is refresh.lua on the request's slot: the one refresh a
// handoff read late needs before Acquire returns, or the confirm of a
// claimed lease after it returned, both to the whole ttl. Fixed matches
// the whole lock value ("holder:seq"): a handoff message read late must
// not renew a lock its holder id got again, later, with a newer token.
func (m *machine) serverRefresh(s *state, r request) reply {
	l := &s.srv.slot[r.slot]
	ok, failed := repRefreshed, repRefreshFailed
	if r.kind == reqConfirm {
		ok, failed = repConfirmed, repConfirmFailed
	}
	rep := reply{client: r.client, acq: r.acq, kind: failed, epoch: s.srv.epoch, slot: r.slot}
	bySeq := m.cfg.Variant == Fixed && !m.cfg.RefreshByHolder
	if l.holder == r.holder && (!bySeq || l.seq == r.seq) {
		l.exp = s.now + int16(m.cfg.TTL)
		s.strand[r.slot] = -1 // confirmed by its holder, which held a lease: a holder's ttl
		rep.kind = ok
	}
	return rep
}

// enqueue is acquire_fair.lua's enqueue: keep the holder's place if it has
// one, renew its ticket, and push both keys' expiry out.
func (m *machine) enqueue(s *state, h, attempt int8) {
	v := &s.srv
	if m.cfg.Variant == Old {
		attempt = 0 // the old ticket was "expiry:ttl"
	}
	i := v.enqueued(h)
	if i < 0 {
		if int(v.nq) == maxQueue {
			panic("model: queue overflow")
		}
		i = int(v.nq)
		v.nq++
	}
	exp := s.now + int16(m.cfg.TicketTTL)
	v.queue[i] = ticket{holder: h, exp: exp, attempt: attempt}
	v.queueExp = exp
}

// liveHead is queue.lua's live_head: drop expired tickets from the head;
// report whether a live one is left there (at queue[0]).
func (m *machine) liveHead(s *state) bool {
	v := &s.srv
	for v.nq > 0 && v.queue[0].exp <= s.now {
		v.dequeue(0)
	}
	return v.nq > 0
}

// nextSeq is common.lua's next_seq on slot i's counter (the lock's: slot
// 0), under the counter rule the config picks.
func (m *machine) nextSeq(s *state, i int) int64 {
	v, c, now := &s.srv.slot[i], &m.cfg, usOf(s.now)
	var seq int64
	if v.hasCtr {
		seq = v.ctr + 1
		if c.ClockFloor {
			seq = max(seq, now)
		}
	} else {
		seq = 1
		if !c.OldCounter || c.ClockFloor || c.CounterTTL != 0 {
			seq = max(seq, now)
		}
	}
	v.hasCtr, v.ctr, v.ctrExp = true, seq, 0
	if c.CounterTTL > 0 {
		v.ctrExp = s.now + int16(c.CounterTTL)
		if !c.OldCounter {
			v.ctrExp = max(v.ctrExp, passes(seq))
		}
	}
	return seq
}

// issue checks property (b) on the server side as slot i's key takes seq:
// every seq a slot is given is above every seq it was given before,
// across expiries and restarts.
func (m *machine) issue(s *state, i int, seq int64) *violation {
	var bad *violation
	if seq <= s.issued[i] {
		what := sprintf("server issued seq %d, not above %d issued before", seq, s.issued[i])
		if m.cfg.sem() {
			what = sprintf("server issued seq %d on slot %d, not above %d issued on it before", seq, i, s.issued[i])
		}
		bad = &violation{Order, what}
	}
	s.issued[i] = max(s.issued[i], seq)
	return bad
}

// counterExpiry is the expiry a key written now with the counter's ttl
// has: the permits key's (a counter's may be later, see nextSeq); 0 for
// none.
func (m *machine) counterExpiry(s *state) int16 {
	if m.cfg.CounterTTL == 0 {
		return 0
	}
	return s.now + int16(m.cfg.CounterTTL)
}

// passes is the first tick at which the clock is past µs value u.
func passes(u int64) int16 { return int16(u/1000 + 1) }

// serverAdvance is advance.lua: lift the counter to at least floor. With
// the new rule a missing counter starts from the clock, and the counter
// lives at least until the clock passes it, so that its loss cannot hand
// out a token at or below the floor.
func (m *machine) serverAdvance(s *state, floor int64) {
	v, c := &s.srv.slot[0], &m.cfg
	if !v.hasCtr {
		v.hasCtr, v.ctr, v.ctrExp = true, floor, 0 // SET KEEPTTL on a missing key: no ttl
		if !c.OldCounter {
			v.ctr = max(floor, usOf(s.now))
			if c.CounterTTL > 0 {
				v.ctrExp = max(s.now+int16(c.CounterTTL), passes(v.ctr))
			}
		}
		return
	}
	if v.ctr < floor {
		v.ctr = floor
		if v.ctrExp != 0 && !c.OldCounter {
			v.ctrExp = max(v.ctrExp, passes(floor))
		}
	}
}

// restart is a Redis without persistence coming back empty. It executes
// nothing more in this tick: a restart takes time, and the clock floor
// relies on the clock having moved on.
func (s *state) restart() {
	s.srv = server{epoch: s.srv.epoch + 1, down: true}
	for i := range s.srv.slot {
		s.srv.slot[i].holder, s.strand[i] = noHolder, -1
	}
}
