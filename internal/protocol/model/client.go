package model

// The client side: the waiting loop of lease/wait.go, one step per thing
// that can happen to it. A client that does not step is paused: time may
// pass without it, so its timers fire late, and when it runs again its
// timer and old messages are all ready and it may take them in any order.

// holderOf is the holder id of client c's acq-th Acquire (1-based).
func (m *machine) holderOf(c, acq int8) int8 {
	if m.cfg.ReuseHolder {
		return c * 8
	}
	return c*8 + acq
}

// takes reports whether client c can still read a message to holder h:
// it is alive and h is the id of its current Acquire, or, with
// ReuseHolder, of any Acquire it has yet to finish.
func (m *machine) takes(s *state, c, h int8) bool {
	cl := &s.cl[c]
	if h/8 != c || cl.phase == gone || cl.phase == dead {
		return false
	}
	if m.cfg.ReuseHolder {
		return cl.phase != idle || int(cl.acq) < m.cfg.Acquisitions
	}
	return cl.phase != idle && h == m.holderOf(c, cl.acq)
}

// start begins the client's next Acquire with its first try.
func (m *machine) start(s *state, c int8) {
	cl := &s.cl[c]
	cl.acq++
	cl.tries = 0
	cl.first = cl.attempts + 1
	m.sendTry(s, c)
}

// sendTry is one c.try in the loop: a fresh attempt id, its send time
// recorded (the sent variable of wait.go), the request in flight.
func (m *machine) sendTry(s *state, c int8) {
	cl := &s.cl[c]
	cl.attempts++
	cl.tries++
	cl.sent[cl.attempts-1] = s.now
	cl.phase = trying
	s.addReq(request{kind: reqTry, client: c, acq: cl.acq, holder: m.holderOf(c, cl.acq), attempt: cl.attempts})
}

// retry is the loop going round after a wake-up or timer that gave no
// lease: the next try at once, or, once this Acquire's tries are spent
// (a bound of the search, not of the code), waiting for messages only.
func (m *machine) retry(s *state, c int8) {
	cl := &s.cl[c]
	if int(cl.tries) < m.cfg.MaxTries {
		m.sendTry(s, c)
		return
	}
	cl.phase, cl.timer = waiting, 0
}

// readReply is c.try (or the handoff's refresh) returning.
func (m *machine) readReply(s *state, c int8, r reply) *violation {
	cl := &s.cl[c]
	ttl, drift := int16(m.cfg.TTL), int16(m.cfg.Drift)
	switch r.kind {
	case repAcquired, repReacquired:
		m.note(evTryLease)
		return m.grant(s, c, r.slot, r.seq, cl.sent[cl.attempts-1]+ttl-drift, r.epoch)
	case repHeld, repQueued:
		wait := int16(m.cfg.Poll) // ticketTTL/3: a queued waiter renews its ticket
		if r.kind == repHeld && r.pttl > 0 && r.pttl < wait {
			wait = r.pttl // the lock expires without a release
		}
		cl.phase, cl.timer = waiting, s.now+wait
	case repRefreshed:
		m.note(evRefreshLease)
		return m.grant(s, c, cl.slot, cl.seq, cl.deadline+ttl-drift, r.epoch)
	case repRefreshFailed:
		m.note(evRefreshFailed)
		cl.seq, cl.deadline, cl.slot = 0, 0, 0
		m.retry(s, c) // handedOff returned nil: the next try finds out
	case repConfirmed:
		// lifetime's refresh: the deadline moves to the confirm's send +
		// ttl, the lease no longer stands on the claim
		m.note(evConfirmed)
		cl.deadline, cl.claim, cl.confirm = cl.confirm+ttl-drift, noClaim, 0
	case repConfirmFailed:
		m.note(evConfirmFailed)
		cl.seq, cl.deadline, cl.epoch, cl.claim, cl.confirm = 0, 0, 0, noClaim, 0 // lost: its release is for cl.slot
	}
	return nil
}

// confirm is the claimed lease's first refresh, to its whole ttl, with its
// token (lifetime.StartClaim): sent at any moment while the lease is live,
// since its timer may fire late.
func (m *machine) confirm(s *state, c int8) {
	cl := &s.cl[c]
	m.note(evConfirmSent)
	cl.claim, cl.confirm = confirming, s.now
	s.addReq(request{kind: reqConfirm, client: c, acq: cl.acq, holder: m.holderOf(c, cl.acq), seq: cl.seq, slot: cl.slot})
}

// readHandoff is handedOff in wait.go: a message naming this waiter's
// holder id (a semaphore's also names the slot, which the lease is then
// for, whatever the waiter's own N: its keys are the name's). The
// variants differ in which send the deadline counts from; Fixed counts
// the claim window (the handed key's ttl) from it and, when that is below
// the ttl, returns a claimed lease that confirms later.
func (m *machine) readHandoff(s *state, c int8, msg message) *violation {
	cl := &s.cl[c]
	if msg.plain() {
		m.note(evWakeRead)
		m.retry(s, c) // hands nothing over: the next try, at once
		return nil
	}
	claim, drift := int16(m.cfg.claim()), int16(m.cfg.Drift)
	span := claim
	if m.cfg.ClaimFullDeadline {
		span = int16(m.cfg.TTL)
	}
	var from int16
	if m.cfg.Variant == Old {
		from = cl.sent[cl.attempts-1] // the last try, whatever it came after
	} else {
		if msg.attempt < cl.first && !m.cfg.SkipAttemptCheck {
			m.note(evOtherAcquire)
			m.retry(s, c) // a handoff to an earlier Acquire of this holder id
			return nil
		}
		from = cl.sent[msg.attempt-1] // the try the handoff followed
	}
	deadline := from + span - drift
	if 2*(deadline-s.now) < claim {
		m.note(evRefreshSent)
		cl.phase, cl.seq, cl.deadline, cl.slot = refreshing, msg.seq, s.now, msg.slot
		s.addReq(request{kind: reqRefresh, client: c, acq: cl.acq, holder: m.holderOf(c, cl.acq), seq: msg.seq, slot: msg.slot})
		return nil
	}
	m.note(evHandoffLease)
	bad := m.grant(s, c, msg.slot, msg.seq, deadline, msg.epoch)
	if int(claim) < m.cfg.TTL && cl.phase == holding && cl.deadline != 0 {
		m.note(evClaimLease)
		cl.claim = claimed
	}
	return bad
}

// grant is Acquire returning a lease on slot i (the lock's: 0), and
// checks property (b) on the client side: a lease that is live when the
// client gets it carries a token above every token of its slot gotten
// live before in its server epoch or an earlier one (the same token again
// only for the same holder: a re-acquire). A lease whose lock an older
// epoch set may carry a lower token than one of a newer epoch gotten
// before it: the restart lost its lock, and the verifier rejects it once
// the newer token has written.
func (m *machine) grant(s *state, c, i int8, seq int64, deadline int16, epoch int8) *violation {
	cl := &s.cl[c]
	h := m.holderOf(c, cl.acq)
	cl.phase, cl.seq, cl.deadline, cl.epoch, cl.slot = holding, seq, deadline, epoch, i
	if deadline <= s.now {
		m.note(evDeadOnArrival)
		if m.cfg.Variant == Old {
			cl.deadline = 0 // returned, lost already: no window at all
			return nil
		}
		// wait.go does not return a lease that is over: the next try gets
		// the lock back (if it is still this holder's) with a fresh deadline.
		cl.seq, cl.deadline, cl.epoch, cl.slot = 0, 0, 0, 0
		m.retry(s, c)
		return nil
	}
	slot := ""
	if m.cfg.sem() {
		slot = sprintf(" of slot %d", i)
	}
	for e := 0; e <= int(epoch); e++ {
		g := s.got[e][i]
		if g.seq > seq || (g.seq == seq && g.holder != h) {
			return &violation{Order, sprintf("%s got seq %d%s (epoch %d) after %s got seq %d (epoch %d)",
				m.holderName(h), seq, slot, epoch, m.holderName(g.holder), g.seq, e)}
		}
	}
	if seq > s.got[epoch][i].seq {
		s.got[epoch][i] = granted{seq: seq, holder: h}
	}
	return nil
}

// giveUp is a waiter whose context ended: wait's deferred leave, which
// lifetime.Detach runs in the background (so it is just sent). With
// silent, the process exits before the leave goes out (Old only).
func (m *machine) giveUp(s *state, c int8, silent bool) {
	cl := &s.cl[c]
	if silent {
		cl.phase = gone
		return
	}
	s.addReq(request{kind: reqLeave, client: c, acq: cl.acq, holder: m.holderOf(c, cl.acq)})
	cl.phase = idle
}

// release is Lease.Release: the lease ends when it is called.
func (m *machine) release(s *state, c int8) {
	cl := &s.cl[c]
	s.addReq(request{kind: reqRelease, client: c, acq: cl.acq, holder: m.holderOf(c, cl.acq), slot: cl.slot})
	cl.phase, cl.seq, cl.deadline, cl.epoch, cl.claim, cl.confirm, cl.slot = idle, 0, 0, 0, noClaim, 0, 0
}

// releasing reports whether client c has a release in flight. Release is
// synchronous in lease; with ReuseHolder a next Acquire that overtook it
// would have its own lock deleted, so the model waits for it there.
func (s *state) releasing(c int8) bool {
	for i := 0; i < int(s.nReq); i++ {
		if s.reqs[i].client == c && s.reqs[i].kind == reqRelease {
			return true
		}
	}
	return false
}
