package model

// The server side: one Redis running the fair lock's scripts atomically.
// Each function is the script named in its comment, reduced to what the
// model observes. The clock is now*1000 "µs", so that INCR, which adds 1
// per acquisition, never overtakes the clock by itself.

// usOf is the server clock at tick t, in µs.
func usOf(t int16) int64 { return int64(t) * 1000 }

// serverTry is acquire_fair.lua with an attempt (a waiting try).
func (m *machine) serverTry(s *state, r request) (reply, *violation) {
	v := &s.srv
	rep := reply{client: r.client, acq: r.acq, epoch: v.epoch}
	if v.holder != noHolder {
		if v.holder == r.holder { // re-acquire: also a handoff whose message was lost
			v.exp = s.now + int16(m.cfg.TTL)
			s.strand = -1 // a try from the holder id: its ttl, as a holder's
			if i := v.enqueued(r.holder); i >= 0 {
				v.dequeue(i)
			}
			rep.kind, rep.seq = repReacquired, v.seq
			return rep, nil
		}
		m.enqueue(s, r.holder, r.attempt)
		rep.kind, rep.pttl = repHeld, v.exp-s.now
		return rep, nil
	}
	if m.liveHead(s) {
		if v.queue[0].holder != r.holder {
			m.enqueue(s, r.holder, r.attempt)
			rep.kind = repQueued
			return rep, nil
		}
		v.dequeue(0)
	}
	seq, bad := m.nextSeq(s)
	v.holder, v.seq, v.exp = r.holder, seq, s.now+int16(m.cfg.TTL)
	s.strand = -1
	rep.kind, rep.seq = repAcquired, seq
	return rep, bad
}

// serverRelease is release_fair.lua, and leave.lua when leave is "1" (a
// waiter that gives up: dequeue, then release if the lock was handed to
// it) or, with ReuseHolder, "2" (dequeue only: the lock may be one the
// same holder id got in an earlier Acquire).
func (m *machine) serverRelease(s *state, r request) *violation {
	v := &s.srv
	if r.kind == reqLeave {
		if i := v.enqueued(r.holder); i >= 0 {
			v.dequeue(i)
		}
		if m.cfg.ReuseHolder {
			return nil
		}
	}
	if v.holder != r.holder {
		return nil
	}
	v.holder, v.seq, v.exp = noHolder, 0, 0
	if !m.liveHead(s) {
		return nil // every fair waiter is queued: nobody to wake
	}
	head := v.queue[0]
	seq, bad := m.nextSeq(s)
	// The ticket's ttl: the claim window (min(ttl, ticket ttl)), which the
	// waiter's first refresh extends to its ttl; a waiter that died never
	// refreshes, and the lock frees when the claim runs out.
	v.holder, v.seq, v.exp = head.holder, seq, s.now+int16(m.cfg.claim())
	s.strand = s.now
	v.dequeue(0)
	m.note(evHandoff)
	if !m.takes(s, head.holder/8, head.holder) {
		m.note(evHandToDead)
	}
	s.addMsg(message{holder: head.holder, seq: seq, attempt: head.attempt, epoch: v.epoch})
	return bad
}

// serverRefresh is refresh.lua: the one refresh a handoff read late needs
// before Acquire returns, or the confirm of a claimed lease after it
// returned, both to the whole ttl. Fixed matches the whole lock value
// ("holder:seq"): a handoff message read late must not renew a lock its
// holder id got again, later, with a newer token.
func (m *machine) serverRefresh(s *state, r request) reply {
	v := &s.srv
	ok, failed := repRefreshed, repRefreshFailed
	if r.kind == reqConfirm {
		ok, failed = repConfirmed, repConfirmFailed
	}
	rep := reply{client: r.client, acq: r.acq, kind: failed, epoch: v.epoch}
	bySeq := m.cfg.Variant == Fixed && !m.cfg.RefreshByHolder
	if v.holder == r.holder && (!bySeq || v.seq == r.seq) {
		v.exp = s.now + int16(m.cfg.TTL)
		s.strand = -1 // confirmed by its holder, which held a lease: a holder's ttl
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

// nextSeq is common.lua's next_seq, under the counter rule the config
// picks. It checks property (b) on the server side: every seq issued is
// above every seq issued before, across expiries and restarts.
func (m *machine) nextSeq(s *state) (int64, *violation) {
	v, c, now := &s.srv, &m.cfg, usOf(s.now)
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
	var bad *violation
	if seq <= s.issued {
		bad = &violation{Order, sprintf("server issued seq %d, not above %d issued before", seq, s.issued)}
	}
	s.issued = max(s.issued, seq)
	return seq, bad
}

// passes is the first tick at which the clock is past µs value u.
func passes(u int64) int16 { return int16(u/1000 + 1) }

// serverAdvance is advance.lua: lift the counter to at least floor. With
// the new rule a missing counter starts from the clock, and the counter
// lives at least until the clock passes it, so that its loss cannot hand
// out a token at or below the floor.
func (m *machine) serverAdvance(s *state, floor int64) {
	v, c := &s.srv, &m.cfg
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
	s.srv = server{holder: noHolder, epoch: s.srv.epoch + 1, down: true}
	s.strand = -1
}
