package model

// Symmetry reduction. The clients run the same code with the same
// configuration, so two states that differ only by a renaming of the
// clients have the same futures up to that renaming, and the properties
// do not care about names. The visited set therefore keys a state by the
// bytes of one renaming of it: clients sorted by a signature of what each
// one is doing. Clients with equal signatures keep their order, so the
// reduction is not perfect, only sound: a missed renaming costs states,
// never a behaviour. Traces are unaffected: the search stores and replays
// the states as reached, unrenamed.

// symKey appends the canonical bytes of s's renaming to b.
func (m *machine) symKey(s *state, b []byte) []byte {
	n := m.cfg.Clients
	var sig [maxClients]uint64
	var perm [maxClients]int8 // perm[new] = old
	for c := 0; c < n; c++ {
		sig[c] = m.signature(s, int8(c))
		perm[c] = int8(c)
	}
	for i := 1; i < n; i++ {
		for j := i; j > 0 && sig[perm[j]] < sig[perm[j-1]]; j-- {
			perm[j], perm[j-1] = perm[j-1], perm[j]
		}
	}
	identity := true
	for c := 0; c < n; c++ {
		identity = identity && perm[c] == int8(c)
	}
	if identity {
		return m.encode(s, b)
	}
	var to [maxClients]int8 // to[old] = new
	for nw := 0; nw < n; nw++ {
		to[perm[nw]] = int8(nw)
	}
	r := *s
	rh := func(h int8) int8 {
		if h == noHolder {
			return h
		}
		return to[h/8]*8 + h%8
	}
	for i := range r.srv.slot {
		r.srv.slot[i].holder = rh(r.srv.slot[i].holder)
	}
	for i := range r.srv.queue[:r.srv.nq] {
		r.srv.queue[i].holder = rh(r.srv.queue[i].holder)
	}
	for i := range r.reqs[:r.nReq] {
		r.reqs[i].client = to[r.reqs[i].client]
		r.reqs[i].holder = rh(r.reqs[i].holder)
	}
	for i := range r.reps[:r.nRep] {
		r.reps[i].client = to[r.reps[i].client]
	}
	for i := range r.msgs[:r.nMsg] {
		r.msgs[i].holder = rh(r.msgs[i].holder)
	}
	for e := range r.got {
		for i := range r.got[e] {
			if r.got[e][i].seq != 0 {
				r.got[e][i].holder = rh(r.got[e][i].holder)
			}
		}
	}
	for nw := 0; nw < n; nw++ {
		r.cl[nw] = s.cl[perm[nw]]
	}
	sortSlice(r.reqs[:r.nReq], lessReq)
	sortSlice(r.reps[:r.nRep], lessRep)
	sortSlice(r.msgs[:r.nMsg], lessMsg)
	return m.encode(&r, b)
}

// signature summarises client c's own state and its place on the server,
// without naming any client.
func (m *machine) signature(s *state, c int8) uint64 {
	cl := &s.cl[c]
	h := uint64(14695981039346656037)
	mix := func(x int64) {
		h ^= uint64(x)
		h *= 1099511628211
	}
	mix(int64(cl.phase))
	mix(int64(cl.acq))
	mix(int64(cl.tries))
	mix(int64(cl.attempts))
	mix(int64(cl.first))
	mix(int64(cl.timer))
	for _, t := range cl.sent[:cl.attempts] {
		mix(int64(t))
	}
	mix(cl.seq)
	mix(int64(cl.deadline))
	mix(int64(cl.epoch))
	mix(int64(cl.claim))
	mix(int64(cl.confirm))
	if m.cfg.sem() {
		mix(int64(cl.n))
		mix(int64(cl.slot))
	}
	for i, l := range s.srv.slot[:m.cfg.slots()] {
		if l.holder != noHolder && l.holder/8 == c {
			mix(int64(1 + 8*i + int(l.holder%8)))
		}
	}
	for i, t := range s.srv.queue[:s.srv.nq] {
		if t.holder/8 == c {
			mix(int64(100 + i))
		}
	}
	for _, r := range s.reqs[:s.nReq] {
		if r.client == c {
			mix(int64(200 + int(r.kind)))
		}
	}
	if s.replyFor(c) >= 0 {
		mix(300)
	}
	for _, msg := range s.msgs[:s.nMsg] {
		if msg.holder/8 == c {
			mix(400 + msg.seq)
		}
	}
	return h
}
