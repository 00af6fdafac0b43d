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

// redisKeys is the lock's keys in Redis at one instant.
type redisKeys struct {
	now                  time.Time
	lock, ctr            *redis.StringCmd
	lockTTL, ctrTTL      *redis.DurationCmd
	queueTTL, ticketsTTL *redis.DurationCmd
	queue                *redis.StringSliceCmd
	tickets              *redis.MapStringStringCmd
}

func (r *replayer) read() (redisKeys, error) {
	var k redisKeys
	var now *redis.TimeCmd
	_, err := rdb.Pipelined(r.ctx, func(p redis.Pipeliner) error {
		now = p.Time(r.ctx)
		k.lock, k.lockTTL = p.Get(r.ctx, r.k.Lock), p.PTTL(r.ctx, r.k.Lock)
		k.ctr, k.ctrTTL = p.Get(r.ctx, r.k.Counter), p.PTTL(r.ctx, r.k.Counter)
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
func (r *replayer) compare(s model.ServerStep, got *protocol.TryResult) error {
	op, want := s.Op, s.After
	k, err := r.read()
	if err != nil {
		return err
	}
	if got != nil {
		outcome := [...]protocol.Outcome{model.Acquired: protocol.Acquired, model.Reacquired: protocol.Reacquired,
			model.Held: protocol.Held, model.Queued: protocol.Reserved}[op.Reply]
		if got.Outcome != outcome {
			return mismatch("try answered %+v, the model %s (seq %d, pttl %d)", *got, op.Reply, op.ReplySeq, op.PTTL)
		}
		switch op.Reply {
		case model.Reacquired:
			if r.tokens[op.ReplySeq] != got.Seq {
				return mismatch("reacquired with seq %d, the model's %d is %d here", got.Seq, op.ReplySeq, r.tokens[op.ReplySeq])
			}
		case model.Held:
			if int(got.PTTL/tick) != op.PTTL {
				return mismatch("held with pttl %v, the model %d ticks", got.PTTL, op.PTTL)
			}
		}
	}
	if err := r.compareCounter(s, k, got); err != nil {
		return err
	}

	// The lock.
	if want.Lock == nil {
		if k.lock.Err() == nil {
			return mismatch("lock %q, the model has none", k.lock.Val())
		}
	} else {
		h, v, err := protocol.ParseLockValue(k.lock.Val())
		if err != nil {
			return mismatch("the model's lock is %+v; Redis: %v", *want.Lock, err)
		}
		if h != r.holder(want.Lock.Holder) {
			return mismatch("lock held by %s, the model's by %s", h, want.Lock.Holder)
		}
		if r.tokens[want.Lock.Seq] != v {
			return mismatch("lock's seq %d, the model's %d is %d here", v, want.Lock.Seq, r.tokens[want.Lock.Seq])
		}
		// A script that set the ttl set it to the model's ticks left: the
		// ttl, or the claim window for a handoff.
		reset := op.Kind == model.OpTry && (op.Reply == model.Acquired || op.Reply == model.Reacquired) ||
			(op.Kind == model.OpRefresh || op.Kind == model.OpConfirm) && op.Reply == model.Refreshed || op.Handoff != nil
		wantTTL := marker(want.Lock.Left)
		if reset {
			wantTTL = time.Duration(want.Lock.Left) * tick
		}
		if !near(k.lockTTL.Val(), wantTTL) {
			return mismatch("lock's pttl %v, want about %v (reset: %v)", k.lockTTL.Val(), wantTTL, reset)
		}
	}

	return r.compareQueue(s, k)
}

// compareCounter checks a token issued in step s and the counter. Where
// the model's server reads its clock (a missing counter, the clock
// floor), Redis's value is only bounded: Redis's clock moves within a
// tick, the model's does not.
func (r *replayer) compareCounter(s model.ServerStep, k redisKeys, got *protocol.TryResult) error {
	op, want, before := s.Op, s.After.Counter, s.Before.Counter
	clock := uint64(k.now.UnixMicro())
	newSeq := int64(0)
	switch {
	case got != nil && op.Reply == model.Acquired:
		newSeq = op.ReplySeq
	case op.Handoff != nil:
		newSeq = op.Handoff.Seq
	}
	var v uint64 // the counter in Redis
	if want == nil {
		if k.ctr.Err() == nil {
			return mismatch("counter %q, the model has none", k.ctr.Val())
		}
	} else {
		var err error
		if v, err = k.ctr.Uint64(); err != nil {
			return mismatch("the model's counter is %+v; Redis: %v", *want, err)
		}
		if hasTTL := k.ctrTTL.Val() > 0; hasTTL != (want.Left > 0) {
			return mismatch("counter's pttl %v, the model's %d ticks left (0: none)", k.ctrTTL.Val(), want.Left)
		}
	}
	switch {
	case newSeq != 0:
		lock := s.After.Lock
		if lock == nil || lock.Seq != newSeq || want == nil || want.Value != newSeq {
			return mismatch("the model issued %d but has lock %+v, counter %+v", newSeq, lock, want)
		}
		if _, seq, err := protocol.ParseLockValue(k.lock.Val()); err != nil || seq != v {
			return mismatch("issued: lock %q, counter %d", k.lock.Val(), v)
		}
		if got != nil && got.Seq != v {
			return mismatch("try answered seq %d, the counter is %d", got.Seq, v)
		}
		if _, dup := r.tokens[newSeq]; dup || v <= r.highest {
			return mismatch("issued %d, not above %d issued or counted before (the model's %d)", v, r.highest, newSeq)
		}
		switch {
		case before == nil: // next_seq on a missing counter: the clock
			if v > clock+1 {
				return mismatch("issued %d on a missing counter, above the clock %d", v, clock)
			}
		case !r.cfg.ClockFloor:
			if v != r.ctr+1 {
				return mismatch("issued %d; the model's token is its counter + 1, %d here", v, r.ctr+1)
			}
		case v != r.ctr+1 && v > clock:
			return mismatch("issued %d with the clock floor: neither counter + 1 (%d) nor the clock (%d)", v, r.ctr+1, clock)
		}
		r.tokens[newSeq] = v
	case want == nil:
	case op.Kind == model.OpAdvance && (before == nil || before.Value != want.Value):
		if before != nil && v != r.floor || before == nil && (v < r.floor || v > max(r.floor, clock)) {
			return mismatch("advanced to %d from %+v with floor %d (the model's %d), clock %d", v, before, r.floor, op.Floor, clock)
		}
	case before == nil || v != r.ctr:
		return mismatch("counter %d, was %d; the model's stays %+v", v, r.ctr, *want)
	}
	r.ctr, r.highest = v, max(r.highest, v)
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
