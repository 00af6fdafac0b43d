package protocol_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/protocol/model"
)

// TestModelReplay ties the model (package model) to the real scripts: it
// replays the model's seeded random walks (model.Replay, the walks of
// TestFixedWalks' kind) on the Redis of TestMain, one script call for each
// step in which the model's server runs a script, through this package's
// Go functions (Acquire with a fair Try and an attempt, Unlock, Leave,
// Refresh for a handoff's refresh and a claimed lease's confirm, Advance),
// and compares the Redis keys with the model's server
// after every step. It fails on the first step where they differ, with the
// walk's trace up to that step.
//
// Time. The scripts read Redis TIME and Redis expires keys by its own
// clock; the model's clock is ticks. The replay does not sleep: a tick is
// D = 10s of ttl (the lock's ttl is cfg.TTL*D, the counter's
// cfg.CounterTTL*D, and the fair try passes cfg.TicketTTL*D as the
// ticket's lifetime instead of protocol.TicketTTL, so that the claim
// window enqueue writes, min(ttl, ticket lifetime), is the model's claim
// in ticks), so nothing expires by itself during a walk, and a
// tick step is replayed as what the model says it did: a lock, counter or
// queue that the model expires at that tick is deleted (DEL), a ticket
// that it expires is rewritten with an expiry in the past. Before every
// script call the replay sets each key's remaining ttl (PEXPIRE) and each
// live ticket's expiry to the model's ticks left plus half a tick, so
// that after the call a ttl the script set (a whole number of ticks: the
// ttl, or the claim for a handoff) is told from one it kept (a half tick
// more), and a held try's PTTL reads as the model's ticks.
//
// Compared after every step: the lock's holder and token, and its ttl:
// kept, or set to the model's ticks (the ttl, or the claim window after a
// handoff); the counter's presence, value, and whether
// it has a ttl; the queue's holders in order; each ticket's liveness, its
// attempt, its ttl field (the model's claim), and whether it was renewed
// for the model's ticket lifetime or kept; the queue keys' ttl, renewed
// with it or kept; each try's, refresh's and confirm's reply (outcome, token, PTTL
// in ticks), each release's and leave's result, and each handoff message
// (holder, token, attempt; a message the model did not publish shows as
// the wrong next message, or at the end of the walk).
//
// Tokens: the model's clock is ticks*1000 µs and Redis's is TIME, so
// tokens are compared through a mapping from the model's values to the
// real ones that must keep their order (a token above another in the
// model is above it in Redis) and, without the clock floor, their steps
// (a token one above the counter in the model is one above it in Redis).
// Not compared: the counter's ttl amount (advance.lua resets the ttl of a counter it lifts, the model
// keeps its expiry: on the safe side, and not seen here), and clients:
// the client side of the model (wait.go's loop) is not the code here.
//
// TestModelReplaySemaphore does the same for a semaphore, slot by slot.
func TestModelReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   model.Config
		walks int
	}{
		// The deep walks' configuration (model.TestFixedWalks): every kind
		// of fault, counter ttl, clock floor.
		{"deep", model.Config{Variant: model.Fixed, Clients: 4, Acquisitions: 3, MaxTries: 4, TTL: 4, TicketTTL: 6, Poll: 2, Horizon: 30,
			Losses: 2, Duplicates: 2, Leaves: 2, Deaths: 1, Restarts: 1, Advances: 1, ClockFloor: true, CounterTTL: 5}, 150},
		// No clock floor and a counter kept forever: tokens step by one.
		{"counter steps", model.Config{Variant: model.Fixed, Clients: 3, Acquisitions: 3, TTL: 3, TicketTTL: 4, Poll: 1, Horizon: 30,
			Leaves: 2, Deaths: 1, Advances: 2, AdvanceAhead: 2}, 100},
		// One holder id per client (lease.WithHolder): leave does not pass on.
		{"same holder", model.Config{Variant: model.Fixed, Clients: 3, Acquisitions: 3, ReuseHolder: true, TTL: 2, TicketTTL: 3, Horizon: 30,
			Leaves: 2, Duplicates: 1, CounterTTL: 3}, 100},
		// The ttl above the ticket lifetime (model.TestFixedWalks' second
		// configuration): a handoff sets the lock for the claim window
		// only, and the lease confirms it to its ttl.
		{"claim", model.Config{Variant: model.Fixed, Clients: 4, Acquisitions: 3, MaxTries: 4, TTL: 8, TicketTTL: 3, Poll: 1, Horizon: 30,
			Losses: 2, Duplicates: 2, Leaves: 2, Deaths: 1, Restarts: 1, Advances: 1, ClockFloor: true, CounterTTL: 5}, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			replayWalks(t, tc.cfg, tc.walks)
		})
	}
}

// replayWalks replays the walks of seeds 1..walks and checks that the
// paths that matter were compared.
func replayWalks(t *testing.T, cfg model.Config, walks int) {
	t.Helper()
	cfg, err := cfg.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var broken []uint64
	for seed := uint64(1); seed <= uint64(walks); seed++ {
		// A walk on which the model breaks a property was compared up to
		// the step that broke it: the scripts did the same. The other
		// walks go on being compared.
		if bad, trace := replayWalk(t, cfg, seed, seen); bad != "" {
			if len(broken) == 0 {
				t.Errorf("seed %d: Redis did as the model did, and the model breaks %s\ntrace:\n%s", seed, bad, trace)
			}
			broken = append(broken, seed)
		}
	}
	if len(broken) > 0 {
		t.Errorf("the model breaks a property on seeds %v", broken)
	}
	t.Logf("%d walks, server steps compared: %v", walks, seen)
	need := []string{"acquired", "reacquired", "held", "queued", "handoff", "refreshed", "refresh failed",
		"released", "lock expired", "ticket expired"}
	if cfg.Restarts > 0 {
		need = append(need, "restart")
	}
	if cfg.Advances > 0 {
		need = append(need, "advance")
	}
	if cfg.CounterTTL > 0 {
		need = append(need, "counter expired")
	}
	if cfg.TTL > cfg.TicketTTL {
		need = append(need, "claimed handoff", "confirmed", "confirm failed")
	}
	if cfg.Permits > 1 {
		need = append(need, "drain handoff")
	}
	if cfg.NewClients > 0 && cfg.NewPermits < cfg.Permits {
		need = append(need, "surplus deleted", "reacquired past N")
	}
	if cfg.Permits > 0 && cfg.CounterTTL > 0 {
		need = append(need, "permits expired", "wake-up")
	}
	for _, e := range need {
		if seen[e] == 0 {
			t.Errorf("no %q step replayed: that path went uncompared", e)
		}
	}
}

// tick is the ttl one model tick stands for.
const tick = 10 * time.Second

// replayWalk replays one walk, counting the kinds of server steps in seen.
// It returns the property the model's walk breaks, in words, and its
// trace; a difference between Redis and the model fails the test.
func replayWalk(t *testing.T, cfg model.Config, seed uint64, seen map[string]int) (string, string) {
	t.Helper()
	r := newReplayer(t.Context(), cfg, fmt.Sprintf("%s/%d", t.Name(), seed))
	r.sub = subscribe(t, r.k, false)
	now, err := rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	r.start = uint64(now.UnixMicro())
	t.Cleanup(func() { rdb.Del(context.Background(), r.keys()...) })
	var trace []string
	res, err := model.Replay(cfg, seed, 400, func(s model.ServerStep) error {
		trace = append(trace, s.Step.String())
		if s.Op.Kind == model.OpNone {
			return nil
		}
		for _, e := range events(cfg, s) {
			seen[e]++
		}
		return r.step(s)
	})
	if err == nil && res.Property != "" {
		return fmt.Sprintf("%s: %s", res.Property, res.Violation), strings.Join(trace, "\n")
	}
	if err == nil {
		// A message of the test's own marks the end: any other before it
		// is one the model did not publish.
		const end = "end of walk"
		if err = rdb.Publish(r.ctx, r.k.Channel, end).Err(); err == nil {
			if p, _ := r.sub.next(2 * time.Second); p != end {
				err = mismatch("message %q, the model published none", p)
			}
		}
	}
	if err != nil {
		t.Fatalf("seed %d, step %d: %v\ntrace up to it:\n%s", seed, len(trace), err, strings.Join(trace, "\n"))
	}
	return "", ""
}

// events names what server step s did, for the test to see that the
// paths it means to compare were taken.
func events(cfg model.Config, s model.ServerStep) []string {
	var e []string
	op := s.Op
	switch op.Kind {
	case model.OpTick:
		for i, b := range s.Before.Slots {
			if b.Lock != nil && s.After.Slots[i].Lock == nil {
				e = append(e, "lock expired")
			}
			if b.Counter != nil && s.After.Slots[i].Counter == nil {
				e = append(e, "counter expired")
			}
		}
		for i, q := range s.After.Queue {
			if q.Left == 0 && i < len(s.Before.Queue) && s.Before.Queue[i].Left > 0 {
				e = append(e, "ticket expired")
			}
		}
		if s.Before.Permits != 0 && s.After.Permits == 0 {
			e = append(e, "permits expired")
		}
	case model.OpRestart:
		e = append(e, "restart")
	case model.OpAdvance:
		e = append(e, "advance")
	case model.OpTry, model.OpRefresh:
		e = append(e, op.Reply.String())
		if op.Kind == model.OpTry && op.Reply == model.Reacquired && op.Slot >= op.N {
			e = append(e, "reacquired past N")
		}
	case model.OpConfirm:
		e = append(e, map[model.ReplyKind]string{model.Refreshed: "confirmed", model.RefreshFailed: "confirm failed"}[op.Reply])
	}
	if op.Wake {
		e = append(e, "wake-up")
	}
	if op.Released {
		e = append(e, "released")
		if op.Kind == model.OpRelease && cfg.Permits > 0 && s.After.Permits > 0 && op.Slot >= s.After.Permits && len(op.Handoffs) == 0 &&
			slices.ContainsFunc(s.Before.Queue, func(t model.Ticket) bool { return t.Left > 0 }) {
			e = append(e, "surplus deleted") // not handed to the live waiter
		}
	}
	for _, h := range op.Handoffs {
		e = append(e, "handoff")
		if l := s.After.Slots[h.Slot].Lock; l != nil && l.Left < cfg.TTL {
			e = append(e, "claimed handoff")
		}
		if op.Kind == model.OpTry {
			e = append(e, "drain handoff")
		}
	}
	return e
}

// replayer runs one walk's steps on Redis and compares.
type replayer struct {
	ctx context.Context
	cfg model.Config
	// k is the lock's keys, or a semaphore's shared ones (queue, tickets,
	// waiting, channel); slots is the lock's k, or each slot's keys.
	k     protocol.Keys
	slots []protocol.Keys
	// sems is a semaphore's keys as a client of N = i+1 has them (the
	// same keys; only the N a call passes differs); nil for the lock.
	sems    []protocol.Semaphore
	counter protocol.Counter
	sub     *subscriber
	start   uint64            // Redis's clock at the walk's start, µs
	floor   uint64            // the last advance's floor, in Redis's terms
	tickets map[string]string // holder -> the ticket as the last alignment wrote it
	at      []slotTokens      // per slot
}

// slotTokens is what the replay knows of one slot's (the lock's) tokens.
type slotTokens struct {
	tokens  map[int64]uint64 // the model's tokens -> Redis's
	ctr     uint64           // Redis's counter after the last step (when the model has one)
	highest uint64           // the highest token or counter Redis had in the walk
}

// newReplayer is a replayer of a lock, or a semaphore when cfg says so,
// named name.
func newReplayer(ctx context.Context, cfg model.Config, name string) *replayer {
	r := &replayer{ctx: ctx, cfg: cfg, tickets: map[string]string{}}
	r.counter = protocol.Counter{TTL: time.Duration(cfg.CounterTTL) * tick, ClockFloor: cfg.ClockFloor}
	if cfg.Permits == 0 {
		r.k = protocol.KeysFor("fencelock-replay:", name)
		r.slots = []protocol.Keys{r.k}
	} else {
		for n := range max(cfg.Permits, cfg.NewPermits) {
			r.sems = append(r.sems, protocol.SemaphoreFor("fencelock-replay:", name, n+1))
		}
		all := r.sems[len(r.sems)-1]
		r.k = all.Keys
		for i := range all.N {
			r.slots = append(r.slots, all.Slot(i))
		}
	}
	for range r.slots {
		r.at = append(r.at, slotTokens{tokens: map[int64]uint64{}})
	}
	return r
}

// keys are every key the walk may write.
func (r *replayer) keys() []string {
	ks := []string{r.k.Queue, r.k.Tickets, r.k.Waiting}
	for _, k := range r.slots {
		ks = append(ks, k.Lock, k.Counter, k.Ahead)
	}
	if r.sems != nil {
		ks = append(ks, r.sems[0].Permits)
	}
	return ks
}

func (r *replayer) holder(name string) string { return "h" + name }

func (r *replayer) release(name string) protocol.Release {
	return protocol.Release{Holder: r.holder(name), Fair: true, Counter: r.counter, PubSub: protocol.PubSubClassic}
}

// try runs a try's step: Acquire with a fair Try, or AcquirePermit with
// the client's N.
func (r *replayer) try(op model.Op) (protocol.PermitResult, error) {
	try := protocol.Try{Holder: r.holder(op.Holder), TTL: time.Duration(r.cfg.TTL) * tick, Counter: r.counter,
		Fair: true, Attempt: protocol.Attempt(op.Attempt), PubSub: protocol.PubSubClassic}
	try = protocol.WithTicketTTL(try, time.Duration(r.cfg.TicketTTL)*tick)
	if r.sems != nil {
		return protocol.AcquirePermit(r.ctx, rdb, r.sems[op.N-1], try)
	}
	res, err := protocol.Acquire(r.ctx, rdb, r.k, try)
	return protocol.PermitResult{TryResult: res}, err
}

// step replays one server step and compares.
func (r *replayer) step(s model.ServerStep) error {
	op := s.Op
	switch op.Kind {
	case model.OpTick:
		if err := r.expire(s.Before, s.After); err != nil {
			return err
		}
		if err := r.align(s.After); err != nil {
			return err
		}
		return r.compare(s, nil)
	case model.OpRestart:
		if err := rdb.Del(r.ctx, r.keys()...).Err(); err != nil {
			return err
		}
		return r.compare(s, nil)
	}
	if err := r.align(s.Before); err != nil {
		return err
	}
	var got *protocol.PermitResult
	switch op.Kind {
	case model.OpTry:
		res, err := r.try(op)
		if err != nil {
			return err
		}
		got = &res
	case model.OpRelease, model.OpLeave:
		var ok bool
		var err error
		switch {
		case op.Kind == model.OpRelease:
			ok, err = protocol.Unlock(r.ctx, rdb, r.slots[op.Slot], r.release(op.Holder))
		case r.sems != nil:
			ok, err = protocol.LeavePermit(r.ctx, rdb, r.sems[op.N-1], r.release(op.Holder), op.PassOn)
		default:
			ok, err = protocol.Leave(r.ctx, rdb, r.k, r.release(op.Holder), op.PassOn)
		}
		if err != nil {
			return err
		}
		if ok != op.Released {
			return mismatch("released %v, the model %v", ok, op.Released)
		}
	case model.OpRefresh, model.OpConfirm:
		var seq uint64
		if op.Seq != 0 {
			var known bool
			if seq, known = r.at[op.Slot].tokens[op.Seq]; !known {
				return fmt.Errorf("refresh with seq %d, which Redis never issued on slot %d", op.Seq, op.Slot)
			}
		}
		ok, err := protocol.Refresh(r.ctx, rdb, r.slots[op.Slot], r.holder(op.Holder), seq, time.Duration(r.cfg.TTL)*tick)
		if err != nil {
			return err
		}
		if ok != (op.Reply == model.Refreshed) {
			return mismatch("refreshed %v, the model answered %s (confirm: %v)", ok, op.Reply, op.Kind == model.OpConfirm)
		}
	case model.OpAdvance:
		// A floor above the clock is a point on the model's clock:
		// ticks from the walk's start, so that equal floors stay equal.
		if op.Ahead > 0 {
			r.floor = r.start + uint64(op.Floor/1000)*uint64(tick.Microseconds())
		} else if r.floor = r.at[0].tokens[op.Floor]; r.floor == 0 {
			return fmt.Errorf("advance to seq %d, which Redis never issued", op.Floor)
		}
		if _, err := protocol.Advance(r.ctx, rdb, r.k, r.floor, r.counter); err != nil {
			return err
		}
	}
	if err := r.compare(s, got); err != nil {
		return err
	}
	return r.handoffs(op)
}

// expire deletes what the model expired at a tick. A ticket it expired
// is left to align, which writes it as expired.
func (r *replayer) expire(before, after model.Server) error {
	var del []string
	for i, b := range before.Slots {
		if b.Lock != nil && after.Slots[i].Lock == nil {
			del = append(del, r.slots[i].Lock)
		}
		if b.Counter != nil && after.Slots[i].Counter == nil {
			del = append(del, r.slots[i].Counter)
		}
	}
	if len(before.Queue) > 0 && len(after.Queue) == 0 {
		del = append(del, r.k.Queue, r.k.Tickets)
	}
	if before.Permits != 0 && after.Permits == 0 {
		del = append(del, r.sems[0].Permits)
	}
	if len(del) == 0 {
		return nil
	}
	return rdb.Del(r.ctx, del...).Err()
}

// marker is the remaining ttl align gives a key with left ticks to go:
// half a tick more than a whole number, so a ttl reset by a script (a
// whole number of ticks) shows.
func marker(left int) time.Duration { return time.Duration(left)*tick + tick/2 }

// align sets the remaining ttls and ticket expiries in Redis to those of
// the model's server s (see TestModelReplay), and records each ticket as
// written.
func (r *replayer) align(s model.Server) error {
	now, raw, err := r.readTickets()
	if err != nil {
		return err
	}
	_, err = rdb.Pipelined(r.ctx, func(p redis.Pipeliner) error {
		for i, sl := range s.Slots {
			if sl.Lock != nil {
				p.PExpire(r.ctx, r.slots[i].Lock, marker(sl.Lock.Left))
			}
		}
		if s.PermitsLeft > 0 {
			p.PExpire(r.ctx, r.sems[0].Permits, marker(s.PermitsLeft))
		}
		if len(s.Queue) > 0 {
			p.PExpire(r.ctx, r.k.Queue, marker(s.QueueLeft))
			p.PExpire(r.ctx, r.k.Tickets, marker(s.QueueLeft))
		}
		clear(r.tickets)
		for _, q := range s.Queue {
			h := r.holder(q.Holder)
			tk, ok := raw[h]
			if !ok {
				continue // compare reports it
			}
			tk.Expires = now.Add(-time.Millisecond)
			if q.Left > 0 {
				tk.Expires = now.Add(marker(q.Left))
			}
			r.tickets[h] = tk.String()
			p.HSet(r.ctx, r.k.Tickets, h, r.tickets[h])
		}
		return nil
	})
	return err
}

// readTickets reads Redis's clock and the tickets.
func (r *replayer) readTickets() (time.Time, map[string]protocol.Ticket, error) {
	var now *redis.TimeCmd
	var all *redis.MapStringStringCmd
	if _, err := rdb.Pipelined(r.ctx, func(p redis.Pipeliner) error {
		now = p.Time(r.ctx)
		all = p.HGetAll(r.ctx, r.k.Tickets)
		return nil
	}); err != nil {
		return time.Time{}, nil, err
	}
	out := map[string]protocol.Ticket{}
	for h, s := range all.Val() {
		tk, err := protocol.ParseTicket(s)
		if err != nil {
			return time.Time{}, nil, err
		}
		out[h] = tk
	}
	return now.Val().Truncate(time.Millisecond), out, nil
}

// handoffs checks the next messages on the lock's channel against the
// handoffs the model published, in order: a semaphore's name their slot;
// its plain wake-up is "".
func (r *replayer) handoffs(op model.Op) error {
	if op.Wake {
		if p, ok := r.sub.next(2 * time.Second); !ok || p != "" {
			return mismatch("message %q (received: %v), the model published a wake-up", p, ok)
		}
	}
	for _, want := range op.Handoffs {
		p, ok := r.sub.next(2 * time.Second)
		if !ok {
			return fmt.Errorf("no handoff message; the model published %+v", want)
		}
		m, err := protocol.ParseMessage(p)
		if err != nil {
			return err
		}
		seq := r.at[want.Slot].tokens[want.Seq]
		if m.Holder != r.holder(want.Holder) || m.Attempt != protocol.Attempt(want.Attempt) || seq != m.Seq ||
			m.Permit != (r.sems != nil) || m.Slot != want.Slot {
			return mismatch("message %q; the model published %+v (its seq is %d here)", p, want, seq)
		}
	}
	return nil
}

// mismatch is a difference between Redis and the model.
func mismatch(format string, a ...any) error {
	return fmt.Errorf("Redis and the model differ: "+format, a...)
}
