package protocol_test

import (
	"errors"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/protocol/model"
)

// slack is how much real time a replayed step may take: far below the
// half tick that tells a kept ttl from a reset one.
const slack = 2 * time.Second

// redisKeys is the lock's (a semaphore's) keys in Redis at one instant.
type redisKeys struct {
	now                  time.Time
	slots                []slotKeys
	permits              *redis.StringCmd
	permitsTTL           *redis.DurationCmd
	queueTTL, ticketsTTL *redis.DurationCmd
	queue                *redis.StringSliceCmd
	tickets              *redis.MapStringStringCmd
}

// slotKeys is one slot's (the lock's) lock key and counter.
type slotKeys struct {
	lock, ctr       *redis.StringCmd
	lockTTL, ctrTTL *redis.DurationCmd
}

func (r *replayer) read() (redisKeys, error) {
	k := redisKeys{slots: make([]slotKeys, len(r.slots))}
	var now *redis.TimeCmd
	_, err := rdb.Pipelined(r.ctx, func(p redis.Pipeliner) error {
		now = p.Time(r.ctx)
		for i, sk := range r.slots {
			sl := &k.slots[i]
			sl.lock, sl.lockTTL = p.Get(r.ctx, sk.Lock), p.PTTL(r.ctx, sk.Lock)
			sl.ctr, sl.ctrTTL = p.Get(r.ctx, sk.Counter), p.PTTL(r.ctx, sk.Counter)
		}
		if r.sems != nil {
			k.permits, k.permitsTTL = p.Get(r.ctx, r.sems[0].Permits), p.PTTL(r.ctx, r.sems[0].Permits)
		}
		k.queue, k.queueTTL = p.ZRange(r.ctx, r.k.Queue, 0, -1), p.PTTL(r.ctx, r.k.Queue)
		k.tickets, k.ticketsTTL = p.HGetAll(r.ctx, r.k.Tickets), p.PTTL(r.ctx, r.k.Tickets)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return k, err
	}
	k.now = now.Val()
	return k, nil
}

// near reports whether d is in (want-slack, want].
func near(d, want time.Duration) bool { return d > want-slack && d <= want }

// compare checks Redis against the model's server after step s, and a
// try's reply got (nil for other steps).
func (r *replayer) compare(s model.ServerStep, got *protocol.PermitResult) error {
	op := s.Op
	k, err := r.read()
	if err != nil {
		return err
	}
	if got != nil {
		outcome := [...]protocol.Outcome{model.Acquired: protocol.Acquired, model.Reacquired: protocol.Reacquired,
			model.Held: protocol.Held, model.Queued: protocol.Reserved}[op.Reply]
		if got.Outcome != outcome {
			return mismatch("try answered %+v, the model %s (seq %d, pttl %d, slot %d)", *got, op.Reply, op.ReplySeq, op.PTTL, op.Slot)
		}
		switch op.Reply {
		case model.Reacquired:
			if seq := r.at[op.Slot].tokens[op.ReplySeq]; seq != got.Seq {
				return mismatch("reacquired with seq %d, the model's %d is %d here", got.Seq, op.ReplySeq, seq)
			}
		case model.Held:
			if int(got.PTTL/tick) != op.PTTL {
				return mismatch("held with pttl %v, the model %d ticks", got.PTTL, op.PTTL)
			}
		}
		if r.sems != nil && got.Got() && got.Slot != op.Slot {
			return mismatch("try got slot %d, the model slot %d", got.Slot, op.Slot)
		}
	}
	for i := range r.slots {
		if err := r.compareCounter(s, i, k, got); err != nil {
			return err
		}
		if err := r.compareLock(s, i, k); err != nil {
			return err
		}
	}
	if err := r.comparePermits(s, k); err != nil {
		return err
	}
	if err := r.compareQueue(s, k); err != nil {
		return err
	}
	return r.compareInspect(s, k)
}

// comparePermits checks a semaphore's permits key: its value, and its
// ttl: none, set to the model's ticks by a try that wrote it (its N
// differed from the key's, or the key was missing), or kept.
func (r *replayer) comparePermits(s model.ServerStep, k redisKeys) error {
	if r.sems == nil {
		return nil
	}
	op, want := s.Op, s.After
	p, _ := k.permits.Int()
	if p != want.Permits {
		return mismatch("permits key %q, the model's %d (0: none)", k.permits.Val(), want.Permits)
	}
	ttl := k.permitsTTL.Val()
	switch {
	case want.Permits == 0:
	case want.PermitsLeft == 0:
		if ttl >= 0 {
			return mismatch("permits key's pttl %v, the model's has no ttl", ttl)
		}
	case op.Kind == model.OpTry && s.Before.Permits != op.N:
		if !near(ttl, time.Duration(want.PermitsLeft)*tick) {
			return mismatch("permits key written with pttl %v, the model's %d ticks", ttl, want.PermitsLeft)
		}
	case !near(ttl, marker(want.PermitsLeft)):
		return mismatch("permits key's pttl %v, kept: want about %v", ttl, marker(want.PermitsLeft))
	}
	return nil
}

// compareLock checks slot i's lock key (the lock's).
func (r *replayer) compareLock(s model.ServerStep, i int, k redisKeys) error {
	op, want, at := s.Op, s.After.Slots[i].Lock, &r.at[i]
	lock, lockTTL := k.slots[i].lock, k.slots[i].lockTTL
	if want == nil {
		if lock.Err() == nil {
			return mismatch("slot %d's lock %q, the model has none", i, lock.Val())
		}
		return nil
	}
	h, v, err := protocol.ParseLockValue(lock.Val())
	if err != nil {
		return mismatch("the model's slot %d lock is %+v; Redis: %v", i, *want, err)
	}
	if h != r.holder(want.Holder) {
		return mismatch("slot %d's lock held by %s, the model's by %s", i, h, want.Holder)
	}
	if at.tokens[want.Seq] != v {
		return mismatch("slot %d lock's seq %d, the model's %d is %d here", i, v, want.Seq, at.tokens[want.Seq])
	}
	// A script that set the ttl set it to the model's ticks left: the
	// ttl, or the claim window for a handoff.
	reset := op.Slot == i && (op.Kind == model.OpTry && (op.Reply == model.Acquired || op.Reply == model.Reacquired) ||
		(op.Kind == model.OpRefresh || op.Kind == model.OpConfirm) && op.Reply == model.Refreshed) ||
		slices.ContainsFunc(op.Handoffs, func(h model.Handoff) bool { return h.Slot == i })
	wantTTL := marker(want.Left)
	if reset {
		wantTTL = time.Duration(want.Left) * tick
	}
	if !near(lockTTL.Val(), wantTTL) {
		return mismatch("slot %d lock's pttl %v, want about %v (reset: %v)", i, lockTTL.Val(), wantTTL, reset)
	}
	return nil
}

// compareInspect checks what InspectSemaphore reads of a semaphore
// against the keys read and the model's server.
func (r *replayer) compareInspect(s model.ServerStep, k redisKeys) error {
	if r.sems == nil {
		return nil
	}
	want := s.After
	st, err := protocol.InspectSemaphore(r.ctx, rdb, r.sems[len(r.sems)-1])
	if err != nil {
		return err
	}
	if st.Permits != want.Permits || st.Queued != len(want.Queue) || len(st.Queue) != len(want.Queue) {
		return mismatch("inspect: permits %d, %d queued; the model's %d, %d", st.Permits, st.Queued, want.Permits, len(want.Queue))
	}
	for i, sl := range st.Slots {
		w, at := want.Slots[i], &r.at[i]
		switch {
		case (w.Lock == nil) != (sl.Holder == ""):
			return mismatch("inspect: slot %d held by %q, the model's %+v", i, sl.Holder, w.Lock)
		case w.Lock != nil && (sl.Holder != r.holder(w.Lock.Holder) || sl.Seq != at.tokens[w.Lock.Seq] ||
			sl.PTTL-k.slots[i].lockTTL.Val() > slack || k.slots[i].lockTTL.Val()-sl.PTTL > slack):
			return mismatch("inspect: slot %d is %+v, the keys %q pttl %v", i, sl, k.slots[i].lock.Val(), k.slots[i].lockTTL.Val())
		case (w.Counter == nil) != (sl.LastSeq == 0) || w.Counter != nil && sl.LastSeq != at.ctr:
			return mismatch("inspect: slot %d's counter %d, the model's %+v (%d here)", i, sl.LastSeq, w.Counter, at.ctr)
		}
	}
	for i, q := range want.Queue {
		w := st.Queue[i]
		if w.Holder != r.holder(q.Holder) || q.Left > 0 && w.Ticket.Attempt != protocol.Attempt(q.Attempt) {
			return mismatch("inspect: waiter %d is %+v, the model's %+v", i, w, q)
		}
	}
	return nil
}

// compareCounter checks a token issued on slot i (the lock) in step s,
// and its counter. Where the model's server reads its clock (a missing
// counter, the clock floor), Redis's value is only bounded: Redis's clock
// moves within a tick, the model's does not.
func (r *replayer) compareCounter(s model.ServerStep, i int, k redisKeys, got *protocol.PermitResult) error {
	op, want, before, at := s.Op, s.After.Slots[i].Counter, s.Before.Slots[i].Counter, &r.at[i]
	ctr, ctrTTL := k.slots[i].ctr, k.slots[i].ctrTTL
	clock := uint64(k.now.UnixMicro())
	newSeq := int64(0)
	if got != nil && op.Reply == model.Acquired && op.Slot == i {
		newSeq = op.ReplySeq
	}
	for _, h := range op.Handoffs {
		if h.Slot == i {
			newSeq = h.Seq
		}
	}
	var v uint64 // the counter in Redis
	if want == nil {
		if ctr.Err() == nil {
			return mismatch("slot %d's counter %q, the model has none", i, ctr.Val())
		}
	} else {
		var err error
		if v, err = ctr.Uint64(); err != nil {
			return mismatch("the model's slot %d counter is %+v; Redis: %v", i, *want, err)
		}
		if hasTTL := ctrTTL.Val() > 0; hasTTL != (want.Left > 0) {
			return mismatch("slot %d counter's pttl %v, the model's %d ticks left (0: none)", i, ctrTTL.Val(), want.Left)
		}
	}
	switch {
	case newSeq != 0:
		lock := s.After.Slots[i].Lock
		if lock == nil || lock.Seq != newSeq || want == nil || want.Value != newSeq {
			return mismatch("the model issued %d on slot %d but has lock %+v, counter %+v", newSeq, i, lock, want)
		}
		if _, seq, err := protocol.ParseLockValue(k.slots[i].lock.Val()); err != nil || seq != v {
			return mismatch("issued on slot %d: lock %q, counter %d", i, k.slots[i].lock.Val(), v)
		}
		if got != nil && op.Slot == i && op.Reply == model.Acquired && got.Seq != v {
			return mismatch("try answered seq %d, slot %d's counter is %d", got.Seq, i, v)
		}
		if _, dup := at.tokens[newSeq]; dup || v <= at.highest {
			return mismatch("issued %d on slot %d, not above %d issued or counted before (the model's %d)", v, i, at.highest, newSeq)
		}
		switch {
		case before == nil: // next_seq on a missing counter: the clock
			if v > clock+1 {
				return mismatch("issued %d on a missing counter, above the clock %d", v, clock)
			}
		case !r.cfg.ClockFloor:
			if v != at.ctr+1 {
				return mismatch("issued %d; the model's token is its counter + 1, %d here", v, at.ctr+1)
			}
		case v != at.ctr+1 && v > clock:
			return mismatch("issued %d with the clock floor: neither counter + 1 (%d) nor the clock (%d)", v, at.ctr+1, clock)
		}
		at.tokens[newSeq] = v
	case want == nil:
	case op.Kind == model.OpAdvance && (before == nil || before.Value != want.Value):
		if before != nil && v != r.floor || before == nil && (v < r.floor || v > max(r.floor, clock)) {
			return mismatch("advanced to %d from %+v with floor %d (the model's %d), clock %d", v, before, r.floor, op.Floor, clock)
		}
	case before == nil || v != at.ctr:
		return mismatch("slot %d's counter %d, was %d; the model's stays %+v", i, v, at.ctr, *want)
	}
	at.ctr, at.highest = v, max(at.highest, v)
	return nil
}

// compareQueue checks the queue and its tickets.
func (r *replayer) compareQueue(s model.ServerStep, k redisKeys) error {
	op, want := s.Op, s.After
	renewing := op.Kind == model.OpTry && (op.Reply == model.Held || op.Reply == model.Queued)
	var holders []string
	for _, q := range want.Queue {
		holders = append(holders, r.holder(q.Holder))
	}
	if !slices.Equal(k.queue.Val(), holders) {
		return mismatch("queue %v, the model's %v", k.queue.Val(), holders)
	}
	if len(k.tickets.Val()) != len(holders) {
		return mismatch("tickets %v for queue %v", k.tickets.Val(), holders)
	}
	now := k.now.Truncate(time.Millisecond)
	for _, q := range want.Queue {
		h := r.holder(q.Holder)
		raw, ok := k.tickets.Val()[h]
		if !ok {
			return mismatch("no ticket for %s", h)
		}
		tk, err := protocol.ParseTicket(raw)
		if err != nil {
			return mismatch("ticket of %s: %v", h, err)
		}
		if live := tk.Expires.After(now); live != (q.Left > 0) {
			return mismatch("ticket of %s %q is live %v, the model's %v", h, raw, live, q.Left > 0)
		}
		if q.Left > 0 && tk.Attempt != protocol.Attempt(q.Attempt) {
			return mismatch("ticket of %s has attempt %d, the model's %d", h, tk.Attempt, q.Attempt)
		}
		if q.Left > 0 && tk.TTL != time.Duration(q.Claim)*tick {
			return mismatch("ticket of %s %q hands the lock over for %v, the model's claim %d ticks", h, raw, tk.TTL, q.Claim)
		}
		aligned, had := r.tickets[h]
		switch {
		case renewing && q.Holder == op.Holder:
			if raw == aligned || !near(tk.Expires.Sub(now), time.Duration(q.Left)*tick) {
				return mismatch("ticket of %s %q not renewed for the model's %d ticks (was %q)", h, raw, q.Left, aligned)
			}
		case !had || raw != aligned:
			return mismatch("ticket of %s is %q, was %q: changed by a step the model says left it", h, raw, aligned)
		}
	}
	if len(want.Queue) == 0 {
		return nil
	}
	for _, d := range []time.Duration{k.queueTTL.Val(), k.ticketsTTL.Val()} {
		wantTTL := marker(want.QueueLeft)
		if renewing {
			wantTTL = time.Duration(want.QueueLeft) * tick
		}
		if !near(d, wantTTL) {
			return mismatch("queue keys' pttl %v; renewed: %v; the model's %d ticks left", d, renewing, want.QueueLeft)
		}
	}
	return nil
}
