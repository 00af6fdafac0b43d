package protocol

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/luascript"
)

//go:generate go run ./luagen

// The scripts, each embedded whole from scripts/ with the SHA-1 that
// luagen wrote beside it (see the package doc): no SHA-1 is computed at
// run time.
var (
	acquire     = script("acquire")
	acquireFair = script("acquire_fair")
	refresh     = script("refresh")
	release     = script("release")
	releaseFair = script("release_fair")
	leave       = script("leave")
	inspect     = script("inspect")
	advance     = script("advance")
	reissue     = script("reissue")
	adopt       = script("adopt")
)

//go:embed scripts/*.lua scripts/*.sha1
var scriptFiles embed.FS

// script is scripts/NAME.lua, run by the hash in scripts/NAME.sha1.
func script(name string) *luascript.Script {
	src, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err) // embedded: only a build without scripts/ gets here
	}
	sha, err := scriptFiles.ReadFile("scripts/" + name + ".sha1")
	if err != nil {
		panic(err)
	}
	return luascript.New(string(src), strings.TrimSpace(string(sha)))
}

// Try is one try to take a lock.
type Try struct {
	Holder   string
	TTL      time.Duration
	Counter  Counter
	Unfenced bool // no counter: Seq is 0 (redlock without quorum fencing)
	Fair     bool // a free lock goes to the head of the queue (acquire_fair.lua)
	// Attempt, for a fair try, queues the holder under this attempt when
	// the lock is not got; 0 tries without queueing (TryAcquire).
	Attempt Attempt
	PubSub  PubSub // how a fair try publishes when it hands a free lock to the live head

	// ticketTTL, when not 0, is the ticket lifetime passed to the script
	// instead of TicketTTL (and so bounds the claim window): only for the
	// model's replay, whose ticks stand for 10s (export_test.go).
	ticketTTL time.Duration
}

// Outcome is what a try found.
type Outcome int8

const (
	// Held: another holder has the lock; TryResult.PTTL says for how long.
	Held Outcome = iota
	// Acquired: the lock was free and is the caller's, with a new Seq.
	Acquired
	// Reacquired: the holder had the lock already (WithHolder after a
	// restart, a fair handoff, a try whose reply was lost); its ttl is
	// reset and Seq is the token it had.
	Reacquired
	// Reserved: the lock is free but reserved for fair waiters queued ahead.
	Reserved
)

// TryResult is a try's reply: {outcome, seq or pttl}.
type TryResult struct {
	Outcome Outcome
	Seq     uint64 // when got; 0 for an unfenced lock
	// PTTL, when Held, is the holder's remaining ttl (<0: none); when
	// Reserved, 0, or the wait before the next try while the queue's
	// expired tickets are being dropped (a few per call).
	PTTL time.Duration
}

// Got reports whether the try took or kept the lock.
func (r TryResult) Got() bool { return r.Outcome == Acquired || r.Outcome == Reacquired }

// call is one script call: the script, its KEYS and ARGV, whose list is
// lent by l.
type call struct {
	s    *luascript.Script
	l    *lockArgs
	keys []string
	args []any
}

// run runs the call and gives its argument list back.
func (cl call) run(ctx context.Context, c redis.Scripter) *redis.Cmd {
	cmd := cl.s.Run(ctx, c, cl.keys, cl.args...)
	cl.l.free(cl.args)
	return cmd
}

// ok runs a call whose script replies 1 when it did what it was for.
func (cl call) ok(ctx context.Context, c redis.Scripter) (bool, error) {
	n, err := cl.run(ctx, c).Int64()
	return n == 1, err
}

func (t Try) call(k Keys) call {
	l := k.args()
	args := t.Counter.appendArgs(append(l.list(), l.holder.of(t.Holder), l.ttl.of(ms(t.TTL))), l)
	if t.Fair {
		a := ""
		if t.Attempt != 0 {
			a = t.Attempt.String()
		}
		tt := ticketTTLArg
		if t.ticketTTL != 0 {
			tt = ms(t.ticketTTL)
		}
		return call{acquireFair, l, l.fair(), append(args, tt, a, l.channel.of(k.Channel), t.PubSub.spublish())}
	}
	return call{acquire, l, l.lockCounter(), append(args, flag(!t.Unfenced))}
}

// ticketTTLArg is ms(TicketTTL) as a script argument, boxed once.
var ticketTTLArg any = ms(TicketTTL)

// Acquire runs one try.
func Acquire(ctx context.Context, c redis.Scripter, k Keys, t Try) (TryResult, error) {
	v, err := t.call(k).run(ctx, c).Result()
	if err != nil {
		return TryResult{}, err
	}
	return t.parse(k, v)
}

// parse reads a try's reply, and refuses Seq 0 on a fenced lock: the value
// of an unfenced lock re-acquired by a fenced client under the same prefix.
func (t Try) parse(k Keys, reply any) (TryResult, error) {
	res, err := ParseTryReply(reply)
	if err == nil && res.Got() && res.Seq == 0 && !t.Unfenced {
		return TryResult{}, fmt.Errorf("acquire script: seq 0 for a fenced lock %q: the lock was taken unfenced", k.Lock)
	}
	return res, err
}

// ParseTryReply reads the reply of acquire.lua or acquire_fair.lua.
func ParseTryReply(reply any) (TryResult, error) {
	v, ok := reply.([]any)
	if !ok || len(v) != 2 {
		return TryResult{}, fmt.Errorf("acquire script: unexpected reply %v", reply)
	}
	code, ok1 := v[0].(int64)
	n, ok2 := v[1].(int64)
	if !ok1 || !ok2 {
		return TryResult{}, fmt.Errorf("acquire script: unexpected reply %v", reply)
	}
	if code < int64(Held) || code > int64(Reserved) {
		return TryResult{}, fmt.Errorf("acquire script: unexpected reply %v", reply)
	}
	switch Outcome(code) {
	case Acquired, Reacquired:
		if n < 0 {
			return TryResult{}, fmt.Errorf("acquire script: bad seq %d", n)
		}
		return TryResult{Outcome: Outcome(code), Seq: uint64(n)}, nil
	case Held:
		return TryResult{Outcome: Held, PTTL: time.Duration(n) * time.Millisecond}, nil
	case Reserved:
		// n > 0: the queue's head is not known yet; try again in n ms.
		return TryResult{Outcome: Reserved, PTTL: time.Duration(max(n, 0)) * time.Millisecond}, nil
	}
	return TryResult{}, fmt.Errorf("acquire script: unexpected reply %v", reply)
}

// AcquireUnfenced takes an unfenced lock (no counter, Seq 0) with a plain
// SET NX PX: the same key and value as an unfenced Try, at the cost of a
// command instead of a script. A PTTL rides in the same pipeline, so that a
// waiter knows when a held lock expires without a second round trip.
func AcquireUnfenced(ctx context.Context, c Pipelined, k Keys, holder string, ttl time.Duration) (TryResult, error) {
	// The replies are read from the returned commands: a batching client
	// (family.Transport) returns copies when ctx ended first.
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, k.Lock, holder+":0", ttl)
		p.PTTL(ctx, k.Lock)
		return nil
	})
	set, ok1 := cmdAt[*redis.BoolCmd](cmds, 0)
	pttl, ok2 := cmdAt[*redis.DurationCmd](cmds, 1)
	if !ok1 || !ok2 {
		if err == nil {
			err = fmt.Errorf("acquire: unexpected replies %v", cmds)
		}
		return TryResult{}, err
	}
	ok, err := set.Result()
	if err != nil {
		return TryResult{}, err
	}
	if ok {
		return TryResult{Outcome: Acquired}, nil
	}
	if pttl.Err() != nil {
		return TryResult{PTTL: -1}, nil // held; when it expires is unknown
	}
	return TryResult{PTTL: pttl.Val()}, nil
}

// Pipelined is a client that sends the commands fn queues together.
type Pipelined interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// cmdAt returns cmds[i] as a C.
func cmdAt[C redis.Cmder](cmds []redis.Cmder, i int) (C, bool) {
	var zero C
	if i >= len(cmds) {
		return zero, false
	}
	c, ok := cmds[i].(C)
	return c, ok
}

// Refresh sets the lock's ttl if holder still has it with token seq (any
// of its tokens when seq is 0), and reports whether it did.
func Refresh(ctx context.Context, c redis.Scripter, k Keys, holder string, seq uint64, ttl time.Duration) (bool, error) {
	s := ""
	if seq != 0 {
		s = strconv.FormatUint(seq, 10)
	}
	l := k.args()
	return call{refresh, l, l.lock(), append(l.list(), l.holder.of(holder), l.ttl.of(ms(ttl)), s)}.ok(ctx, c)
}

// Release is how a holder lets go of a lock.
type Release struct {
	Holder  string
	Fair    bool    // hand the lock to the head of the queue (release_fair.lua)
	Counter Counter // for the handed-over lock's new Seq
	PubSub  PubSub  // how the message is published
}

// Unlock deletes the lock if the holder still has it and passes it on: a
// fair lock to the live head of the queue with a new Seq and a handoff
// message, an unfair one with a plain wake-up. It reports whether it did.
//
// A semaphore's slot (keys from [Semaphore.Slot]) is always handed on, to
// the semaphore's queue, with a message naming the slot (release_fair.lua
// with the slot).
func Unlock(ctx context.Context, c redis.Scripter, k Keys, r Release) (bool, error) {
	l := k.args()
	args := append(l.list(), l.holder.of(r.Holder), l.channel.of(k.Channel))
	if r.Fair || k.permit.permits != "" {
		args = append(r.Counter.appendArgs(args, l), r.PubSub.spublish())
		if k.permit.permits != "" {
			args = append(args, k.permit.slot)
		}
		return call{releaseFair, l, l.release(), args}.ok(ctx, c)
	}
	return call{release, l, l.lock(), append(args, r.PubSub.spublish())}.ok(ctx, c)
}

// Leave is a waiter giving up: a fair waiter drops its ticket, and with
// passOn, if the lock was handed to it meanwhile, hands it on. A re-acquire
// under a known holder id passes passOn false: the lock may be one the
// holder had before, and is not Leave's to give away. For an unfair lock
// Leave with passOn is Unlock (a try whose reply was lost may have taken
// it). It reports whether it released the lock.
func Leave(ctx context.Context, c redis.Scripter, k Keys, r Release, passOn bool) (bool, error) {
	if !r.Fair {
		if !passOn {
			return false, nil
		}
		return Unlock(ctx, c, k, r)
	}
	l := k.args()
	args := r.Counter.appendArgs(append(l.list(), l.holder.of(r.Holder), l.channel.of(k.Channel)), l)
	return call{leave, l, l.fair(), append(args, r.PubSub.spublish(), flag(passOn))}.ok(ctx, c)
}

// Advance lifts the counter to at least floor (an atomic max, under the
// counter rule) and returns its value afterwards. A missing counter stands
// at the clock, so the value may be above floor. A floor more than
// [MaxAhead] above the server's clock is refused with [ErrPoisoned].
func Advance(ctx context.Context, c redis.Scripter, k Keys, floor uint64, counter Counter) (uint64, error) {
	l := k.args()
	n, err := advance.Run(ctx, c, l.lockCounter(), floor, l.counterTTL.of(ms(counter.TTL))).Int64()
	if err != nil {
		return 0, counterErr(err)
	}
	return uint64(n), nil
}

// State is a lock's state at one instant.
type State struct {
	Holder  string        // "" when free
	Seq     uint64        // the holder's token Seq; 0 when free
	PTTL    time.Duration // remaining ttl; 0 when free, NoTTL when the lock key has none
	LastSeq uint64        // the counter: the last Seq issued (0 when absent)
	Queued  int           // fair waiters in the queue, live or not yet dropped
	Head    string        // the queue's first waiter ("" when none), live or not
	// HeadTicket is Head's ticket; the zero Ticket when it has none or it
	// does not parse (a waiter the next fair call drops).
	HeadTicket Ticket
}

// NoTTL is State.PTTL for a lock key without a ttl, which never expires:
// the longest duration, so that a quorum's view sorts it as the longest.
const NoTTL time.Duration = math.MaxInt64

// Inspect reads the lock's state in one atomic step.
func Inspect(ctx context.Context, c redis.Scripter, k Keys) (State, error) {
	v, err := inspect.Run(ctx, c, k.args().fair()).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return State{}, err
	}
	if len(v) != 6 {
		return State{}, fmt.Errorf("inspect script: unexpected reply %v", v)
	}
	var s State
	if val, ok := v[0].(string); ok {
		s.Holder, s.Seq, err = ParseLockValue(val)
		if err != nil {
			return State{}, err
		}
		switch p, _ := v[1].(int64); {
		case p > 0:
			s.PTTL = time.Duration(p) * time.Millisecond
		case p == -1: // no ttl: set by hand, never by fencelock
			s.PTTL = NoTTL
		}
	}
	if c, ok := v[2].(string); ok {
		s.LastSeq, err = strconv.ParseUint(c, 10, 64)
		if err != nil {
			return State{}, fmt.Errorf("inspect script: counter %q: %w", c, err)
		}
	}
	q, _ := v[3].(int64)
	s.Queued = int(q)
	s.Head, _ = v[4].(string)
	if t, ok := v[5].(string); ok {
		s.HeadTicket, _ = ParseTicket(t)
	}
	return s, nil
}

// LockValue is the lock key's value for holder and seq: "holder:seq".
func LockValue(holder string, seq uint64) string { return holder + ":" + strconv.FormatUint(seq, 10) }

// ParseLockValue reads a lock key's value.
func ParseLockValue(v string) (holder string, seq uint64, err error) {
	h, s, ok := strings.Cut(v, ":")
	if ok {
		seq, err = strconv.ParseUint(s, 10, 64)
	}
	if !ok || h == "" || err != nil {
		return "", 0, fmt.Errorf("protocol: lock value %q is not holder:seq", v)
	}
	return h, seq, nil
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// MayHaveRun reports whether a failed call may still have run on the
// server, so that its effect (a lock taken) must be undone: anything but an
// error reply from Redis itself or a connection that was never made
// (refused, no route, dial timeout), or a call that internal/batch never
// sent because its caller left first (batch.ErrNotSent, recognised by its
// NotSent method). A timeout, a cancelled context or a broken connection
// after the request was written leave it open.
func MayHaveRun(err error) bool {
	var rerr redis.Error
	var operr *net.OpError
	var unsent interface{ NotSent() bool }
	switch {
	case err == nil:
		return false
	case errors.As(err, &unsent) && unsent.NotSent():
		return false
	case errors.As(err, &rerr):
		return false
	case errors.As(err, &operr) && operr.Op == "dial":
		return false
	}
	return true
}
