package model

// Replay hands a walk to a test that runs the same steps on the real
// scripts (package protocol's TestModelReplay, and TestModelReplaySemaphore
// for a semaphore): each step names the script call it made, the model's
// answer, and the model server's keys before and after it, in the
// scripts' terms (holder ids, tokens, ticks left before a key or ticket
// expires).

// OpKind is what a step did to the server.
type OpKind uint8

const (
	OpNone    OpKind = iota // a client or network step: the server is untouched
	OpTick                  // time passed; keys whose time ran out are gone
	OpRestart               // the server came back empty
	OpAdvance               // advance.lua
	OpTry                   // acquire_fair.lua with an attempt (a waiting try); sem_acquire.lua
	OpRelease               // release_fair.lua (with the slot, on a semaphore)
	OpLeave                 // leave.lua; sem_leave.lua
	OpRefresh               // refresh.lua: a handoff's refresh before Acquire returns
	OpConfirm               // refresh.lua: a claimed lease's confirm to its whole ttl
)

// ReplyKind is a try's or refresh's answer.
type ReplyKind uint8

const (
	Acquired ReplyKind = iota
	Reacquired
	Held
	Queued // the lock is free but reserved for the waiters ahead
	Refreshed
	RefreshFailed
)

var replyNames = [...]string{Acquired: "acquired", Reacquired: "reacquired", Held: "held", Queued: "queued",
	Refreshed: "refreshed", RefreshFailed: "refresh failed"}

func (k ReplyKind) String() string { return replyNames[k] }

// Op is one step's script call and the model's answer to it.
type Op struct {
	Kind    OpKind
	Holder  string // try, release, leave, refresh, confirm: the holder id, as traces name it ("B2")
	Attempt int    // try: the attempt id, unique within the walk (from 1)
	N       int    // a semaphore's try and leave: the N its client asks for
	Slot    int    // a semaphore's release, refresh, confirm: the slot; a try's: the slot got
	Seq     int64  // refresh, confirm: the token Seq the lock value must have; 0 for any
	PassOn  bool   // leave: hand on a lock that was handed to the holder
	Floor   int64  // advance: the floor, the highest Seq issued or (Ahead) the clock plus Ahead ticks
	Ahead   int    // advance above the clock: by this many ticks; 0 for the highest Seq issued

	Reply    ReplyKind // try; refresh and confirm: Refreshed or RefreshFailed
	ReplySeq int64     // try: the token got
	PTTL     int       // try answered Held: ticks until the lock (a semaphore: its first slot) expires
	Released bool      // release, leave: the holder's lock was let go
	// Wake: a semaphore's release or leave found no permits key and
	// published a plain wake-up (""), handing nothing over.
	Wake bool
	// Handoffs are the handoff messages published, in order: a release's
	// or leave's, and a semaphore's try's for the free slots it handed on.
	Handoffs []Handoff
}

// Handoff is a handoff message: the lock (a semaphore's Slot) given to
// Holder with Seq, after the try Attempt that wrote its ticket.
type Handoff struct {
	Holder  string
	Seq     int64
	Attempt int
	Slot    int
}

// Server is the model server's keys. Left counts the ticks until a key
// or ticket expires.
type Server struct {
	Slots       []Slot   // the lock's keys; a semaphore's slots, from 0
	Permits     int      // a semaphore's permits key; 0 when missing
	PermitsLeft int      // ticks until the permits key expires; 0 when it has no ttl
	Queue       []Ticket // the queue in order; empty when its keys are missing
	QueueLeft   int      // ticks until both queue keys expire
}

// Slot is a lock key and its counter: the lock's, or a semaphore slot's.
type Slot struct {
	Lock    *LockKey    // nil when the lock key is missing
	Counter *CounterKey // nil when the counter is missing
}

// LockKey is the lock key: "holder:seq".
type LockKey struct {
	Holder string
	Seq    int64
	Left   int
}

// CounterKey is the counter; Left is 0 when it has no ttl.
type CounterKey struct {
	Value int64
	Left  int
}

// Ticket is a queue entry and its ticket. Left is 0 for an expired
// ticket, which keeps its place until a script drops it; Attempt and
// Claim are then 0. Claim is the ticket's ttl: the ticks a handoff to it
// sets the lock key for (the claim window, min(ttl, ticket lifetime)).
type Ticket struct {
	Holder  string
	Left    int
	Attempt int
	Claim   int
}

// ServerStep is one step of a replayed walk.
type ServerStep struct {
	Step          Step // as the walk's trace has it
	Op            Op
	Before, After Server
}

// Replay runs the walk of seed, step for step as [Walk], and calls visit
// with each step; it stops at visit's first error and returns it. The
// Result is the walk's.
func Replay(cfg Config, seed uint64, maxSteps int, visit func(ServerStep) error) (Result, error) {
	cfg, err := cfg.norm()
	if err != nil {
		return Result{}, err
	}
	m := &machine{cfg: cfg}
	path, bad := m.walk(seed, maxSteps)
	res := Result{States: len(path), Transitions: len(path), Depth: len(path)}
	if bad != nil {
		res = m.fail(res, bad, path)
	} else {
		res = m.counted(res)
		res.Trace = m.trace(path)
	}
	s := m.initial()
	for i, a := range path {
		next, _ := m.apply(s, a)
		st := ServerStep{Step: res.Trace[i], Op: m.op(&s, &next, a), Before: m.server(&s), After: m.server(&next)}
		if err := visit(st); err != nil {
			return res, err
		}
		s = next
	}
	return res, nil
}

// WithDefaults returns c with the defaults filled in, or an error for a
// bound out of range.
func (c Config) WithDefaults() (Config, error) { return c.norm() }

// attemptID is client c's attempt a as an id unique within a walk.
func attemptID(c, a int8) int { return int(c)*maxAttempts + int(a) }

// op describes step a from s to next as a script call.
func (m *machine) op(s, next *state, a action) Op {
	switch a.kind {
	case aTick:
		return Op{Kind: OpTick}
	case aRestart:
		return Op{Kind: OpRestart}
	case aAdvance:
		op := Op{Kind: OpAdvance, Floor: m.advanceFloor(s, a.idx)}
		if a.idx == 1 {
			op.Ahead = m.cfg.AdvanceAhead
		}
		return op
	case aServe:
	default:
		return Op{}
	}
	r := s.reqs[a.idx]
	op := Op{Holder: m.holderName(r.holder), N: int(s.cl[r.client].n), Slot: int(r.slot)}
	for _, msg := range m.handoffs(s, next, r) {
		op.Handoffs = append(op.Handoffs, Handoff{Holder: m.holderName(msg.holder), Seq: msg.seq,
			Attempt: attemptID(msg.holder/8, msg.attempt), Slot: int(msg.slot)})
	}
	switch r.kind {
	case reqTry, reqRefresh, reqConfirm:
		op.Kind, op.Attempt = OpTry, attemptID(r.client, r.attempt)
		if r.kind == reqTry {
			op.Slot = int(m.last.slot)
		}
		if r.kind != reqTry {
			op.Kind, op.Attempt = OpRefresh, 0
			if r.kind == reqConfirm {
				op.Kind = OpConfirm
			}
			if m.cfg.Variant == Fixed && !m.cfg.RefreshByHolder {
				op.Seq = r.seq
			}
		}
		rep := m.last
		op.Reply, op.ReplySeq, op.PTTL = [...]ReplyKind{repAcquired: Acquired, repReacquired: Reacquired,
			repHeld: Held, repQueued: Queued, repRefreshed: Refreshed, repRefreshFailed: RefreshFailed,
			repConfirmed: Refreshed, repConfirmFailed: RefreshFailed}[rep.kind],
			rep.seq, int(rep.pttl)
		return op
	case reqRelease:
		op.Kind = OpRelease
	case reqLeave:
		op.Kind, op.PassOn = OpLeave, !m.cfg.ReuseHolder
	default:
		panic(sprintf("model: request kind %d has no script call in Replay", r.kind))
	}
	if op.Kind == OpRelease {
		op.Released = s.srv.slot[r.slot].holder == r.holder
	}
	if op.PassOn {
		op.Released = m.heldSlot(s, r.holder, max(op.N, int(s.srv.permits))) >= 0
	}
	op.Wake = m.woke
	return op
}

// server is s's keys.
func (m *machine) server(s *state) Server {
	v, now := &s.srv, int(s.now)
	out := Server{Slots: make([]Slot, m.cfg.slots()), Permits: int(v.permits)}
	if v.permitsExp != 0 {
		out.PermitsLeft = int(v.permitsExp) - now
	}
	for i, l := range v.slot[:m.cfg.slots()] {
		if l.holder != noHolder {
			out.Slots[i].Lock = &LockKey{Holder: m.holderName(l.holder), Seq: l.seq, Left: int(l.exp) - now}
		}
		if l.hasCtr {
			out.Slots[i].Counter = &CounterKey{Value: l.ctr}
			if l.ctrExp != 0 {
				out.Slots[i].Counter.Left = int(l.ctrExp) - now
			}
		}
	}
	for _, t := range v.queue[:v.nq] {
		q := Ticket{Holder: m.holderName(t.holder)}
		if t.exp != 0 {
			q.Left, q.Attempt, q.Claim = int(t.exp)-now, attemptID(t.holder/8, t.attempt), m.cfg.claim()
		}
		out.Queue = append(out.Queue, q)
	}
	if v.nq > 0 {
		out.QueueLeft = int(v.queueExp) - now
	}
	return out
}
