package model

import "encoding/binary"

// A state is stored between search levels as its canonical bytes (about a
// tenth of the struct), and the visited set keeps only a 64-bit hash of
// them: at the few million states a test explores, a collision, which
// could only hide a state (never invent a violation), has odds of about
// one in a million.

// Small fields take one byte, ticks two, tokens a varint.
type enc struct{ b []byte }

func (e *enc) u(x uint64) { e.b = binary.AppendUvarint(e.b, x) }
func (e *enc) b1(x int8)  { e.b = append(e.b, byte(x)) }
func (e *enc) b2(x int16) { e.b = append(e.b, byte(x), byte(x>>8)) }
func (e *enc) flag(x bool) {
	if x {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

type dec struct {
	b []byte
	p int
}

func (d *dec) u() uint64 {
	x, n := binary.Uvarint(d.b[d.p:])
	d.p += n
	return x
}

func (d *dec) i8() int8 {
	d.p++
	return int8(d.b[d.p-1])
}

func (d *dec) i16() int16 {
	d.p += 2
	return int16(uint16(d.b[d.p-2]) | uint16(d.b[d.p-1])<<8)
}

// encode appends the canonical bytes of s to b.
func (m *machine) encode(s *state, b []byte) []byte {
	e := enc{b}
	v, sem := &s.srv, m.cfg.sem() // a semaphore's fields are constant for the lock
	e.b2(s.now)
	for _, l := range v.slot[:m.cfg.slots()] {
		e.b1(l.holder)
		e.u(uint64(l.seq))
		e.b2(l.exp)
		e.flag(l.hasCtr)
		e.u(uint64(l.ctr))
		e.b2(l.ctrExp)
	}
	if sem {
		e.b1(v.permits)
		e.b2(v.permitsExp)
	}
	e.b2(v.queueExp)
	e.b1(v.epoch)
	e.flag(v.down)
	e.b1(v.nq)
	for _, t := range v.queue[:v.nq] {
		e.b1(t.holder)
		e.b2(t.exp)
		e.b1(t.attempt)
	}
	e.b1(s.nReq)
	for _, r := range s.reqs[:s.nReq] {
		e.b1(int8(r.kind))
		e.b1(r.client)
		e.b1(r.acq)
		e.b1(r.holder)
		e.b1(r.attempt)
		e.u(uint64(r.seq))
		if sem {
			e.b1(r.slot)
		}
	}
	e.b1(s.nRep)
	for _, r := range s.reps[:s.nRep] {
		e.b1(r.client)
		e.b1(r.acq)
		e.b1(int8(r.kind))
		e.u(uint64(r.seq))
		e.b2(r.pttl)
		e.b1(r.epoch)
		if sem {
			e.b1(r.slot)
		}
	}
	e.b1(s.nMsg)
	for _, msg := range s.msgs[:s.nMsg] {
		e.b1(msg.holder)
		e.u(uint64(msg.seq))
		e.b1(msg.attempt)
		e.b1(msg.epoch)
		if sem {
			e.b1(msg.slot)
		}
	}
	for c := 0; c < m.cfg.Clients; c++ {
		cl := &s.cl[c]
		e.b1(int8(cl.phase))
		e.b1(cl.acq)
		e.b1(cl.tries)
		e.b1(cl.attempts)
		e.b1(cl.first)
		e.b2(cl.timer)
		for _, t := range cl.sent[:cl.attempts] {
			e.b2(t)
		}
		e.u(uint64(cl.seq))
		e.b2(cl.deadline)
		e.b1(cl.epoch)
		e.b1(int8(cl.claim))
		e.b2(cl.confirm)
		if sem {
			e.b1(cl.n)
			e.b1(cl.slot)
		}
	}
	e.b = append(e.b, byte(s.losses), byte(s.dups), byte(s.restarts), byte(s.leaves), byte(s.deaths), byte(s.advances))
	n := m.cfg.slots()
	for i := range n {
		e.u(uint64(s.issued[i]))
		e.b2(s.strand[i])
		if sem {
			e.b2(s.free[i])
		}
	}
	for _, g := range s.got[:m.cfg.Restarts+1] {
		for _, g := range g[:n] {
			e.u(uint64(g.seq))
			e.b1(g.holder)
		}
	}
	e.b2(s.quiet)
	if sem {
		e.b1(int8(s.surplus))
	}
	return e.b
}

// decode is the inverse of encode.
func (m *machine) decode(b []byte) state {
	d := dec{b: b}
	var s state
	v, sem := &s.srv, m.cfg.sem()
	s.now = d.i16()
	n := m.cfg.slots()
	for i := range maxSlots {
		l := &v.slot[i]
		if i >= n {
			l.holder, s.strand[i], s.free[i] = noHolder, -1, -1
			continue
		}
		l.holder = d.i8()
		l.seq = int64(d.u())
		l.exp = d.i16()
		l.hasCtr = d.i8() == 1
		l.ctr = int64(d.u())
		l.ctrExp = d.i16()
	}
	if sem {
		v.permits = d.i8()
		v.permitsExp = d.i16()
	}
	v.queueExp = d.i16()
	v.epoch = d.i8()
	v.down = d.i8() == 1
	v.nq = d.i8()
	for i := range v.queue[:v.nq] {
		v.queue[i] = ticket{holder: d.i8(), exp: d.i16(), attempt: d.i8()}
	}
	s.nReq = d.i8()
	for i := range s.reqs[:s.nReq] {
		s.reqs[i] = request{kind: reqKind(d.i8()), client: d.i8(), acq: d.i8(), holder: d.i8(), attempt: d.i8(), seq: int64(d.u())}
		if sem {
			s.reqs[i].slot = d.i8()
		}
	}
	s.nRep = d.i8()
	for i := range s.reps[:s.nRep] {
		s.reps[i] = reply{client: d.i8(), acq: d.i8(), kind: repKind(d.i8()), seq: int64(d.u()), pttl: d.i16(), epoch: d.i8()}
		if sem {
			s.reps[i].slot = d.i8()
		}
	}
	s.nMsg = d.i8()
	for i := range s.msgs[:s.nMsg] {
		s.msgs[i] = message{holder: d.i8(), seq: int64(d.u()), attempt: d.i8(), epoch: d.i8()}
		if sem {
			s.msgs[i].slot = d.i8()
		}
	}
	for c := 0; c < m.cfg.Clients; c++ {
		cl := &s.cl[c]
		cl.phase = phase(d.i8())
		cl.acq, cl.tries, cl.attempts, cl.first = d.i8(), d.i8(), d.i8(), d.i8()
		cl.timer = d.i16()
		for i := range cl.sent[:cl.attempts] {
			cl.sent[i] = d.i16()
		}
		cl.seq = int64(d.u())
		cl.deadline = d.i16()
		cl.epoch = d.i8()
		cl.claim = claim(d.i8())
		cl.confirm = d.i16()
		cl.n = 1
		if sem {
			cl.n = d.i8()
			cl.slot = d.i8()
		}
	}
	s.losses, s.dups, s.restarts = d.i8(), d.i8(), d.i8()
	s.leaves, s.deaths, s.advances = d.i8(), d.i8(), d.i8()
	for i := range n {
		s.issued[i] = int64(d.u())
		s.strand[i] = d.i16()
		s.free[i] = -1
		if sem {
			s.free[i] = d.i16()
		}
	}
	for e := range s.got[:m.cfg.Restarts+1] {
		for i := range n {
			s.got[e][i] = granted{seq: int64(d.u()), holder: d.i8()}
		}
	}
	s.quiet = d.i16()
	if sem {
		s.surplus = uint8(d.i8())
	}
	return s
}

// hash64 hashes the bytes eight at a time, each word folded in with a
// multiply and a shift, finished with a 64-bit mixer.
func hash64(b []byte) uint64 {
	h := uint64(len(b)) * 0x9e3779b97f4a7c15
	for len(b) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(b)) * 0xbf58476d1ce4e5b9
		h ^= h >> 31
		b = b[8:]
	}
	var w uint64
	for i, c := range b {
		w |= uint64(c) << (8 * i)
	}
	h = (h ^ w) * 0x94d049bb133111eb
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9a64ce53e87
	h ^= h >> 33
	return h
}

// hashSet is the visited set: open addressing on 64-bit hashes, half
// full at most. It costs 16 bytes a state and one cache miss a lookup,
// about half of what a Go map takes here.
type hashSet struct {
	slots []uint64 // 0: empty
	n     int
}

func newHashSet() *hashSet { return &hashSet{slots: make([]uint64, 1<<16)} }

// add inserts h and reports whether it was new.
func (t *hashSet) add(h uint64) bool {
	if h == 0 {
		h = 1
	}
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t.slots[i] {
		case h:
			return false
		case 0:
			t.slots[i] = h
			t.n++
			return true
		}
	}
}

func (t *hashSet) grow() {
	old := t.slots
	t.slots = make([]uint64, 2*len(old))
	mask := uint64(len(t.slots) - 1)
	for _, h := range old {
		if h == 0 {
			continue
		}
		i := h & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = h
	}
}
