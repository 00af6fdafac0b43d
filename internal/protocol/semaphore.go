package protocol

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxPermits is the most permits a semaphore may have. Each of its calls
// reads every slot, so that a call's work grows with N: 64 keeps a call
// to a few hundred microseconds of the server.
const MaxPermits = 64

// The semaphore's scripts (the others are in calls.go).
var (
	semAcquire = script("sem_acquire")
	semLeave   = script("sem_leave")
	semInspect = script("sem_inspect")
)

// Semaphore are the keys of a semaphore of N permits on a name: N slots,
// each a lock with its own counter (so its own tokens), sharing one fair
// queue, one channel and the permits key, which holds the N of the last
// try (a release hands a slot on only below it). All of them share the
// name's hash tag: PREFIX{NAME}#i for slot i's lock (with :fence and
// :ahead after it for its counter and ahead key), PREFIX{NAME}#queue,
// #tickets, #waiting, #release (the channel) and #permits. No lock's keys
// (PREFIX{NAME} and PREFIX{NAME}:...) can be one of them.
type Semaphore struct {
	// Keys holds the semaphore's Queue, Tickets, Waiting and Channel; its
	// Lock, Counter and Ahead are slot 0's.
	Keys    Keys
	Permits string // PREFIX{NAME}#permits
	N       int
	slots   []Keys
	all     []string // the KEYS of sem_acquire, sem_leave and sem_inspect (slot.lua makes the slots')
	base    string   // PREFIX{NAME}#
}

// SemaphoreFor returns the keys of the semaphore name of n permits
// (1..MaxPermits) under prefix. The name must have passed
// fence.ValidateKey.
func SemaphoreFor(prefix, name string, n int) Semaphore {
	base := prefix + "{" + name + "}#"
	s := Semaphore{Permits: base + "permits", N: n, slots: make([]Keys, n), base: base}
	for i := range n {
		s.slots[i] = s.Slot(i)
	}
	s.Keys = s.slots[0]
	s.Keys.permit, s.Keys.cache = permitOf{}, nil
	s.all = []string{s.Keys.Lock, s.Keys.Counter, s.Keys.Ahead, s.Keys.Queue, s.Keys.Tickets, s.Keys.Waiting, s.Permits}
	return s
}

// Slot returns the keys of slot i (0..MaxPermits-1), which a permit's
// lease refreshes, releases (release_fair.lua with the slot) and reissues
// like a lock's.
// A slot at or past N is one a client with a larger N took or handed over.
func (s Semaphore) Slot(i int) Keys {
	if i < len(s.slots) && s.slots[i].Lock != "" {
		return s.slots[i]
	}
	return slotKeys(s.base, i)
}

// slotKeys are the keys of slot i of the semaphore whose keys start with
// base, PREFIX{NAME}#.
func slotKeys(base string, i int) Keys {
	k := Keys{Queue: base + "queue", Tickets: base + "tickets", Waiting: base + "waiting", Channel: base + "release"}
	k.Lock = base + strconv.Itoa(i)
	k.Counter, k.Ahead = k.Lock+":fence", k.Lock+":ahead"
	k.permit = permitOf{permits: base + "permits", slot: i}
	k.cache = newLockArgs(k)
	return k
}

// PermitName is the name of slot i's permits of the semaphore name: the
// Key of their tokens, "NAME#i", so that a verifier keeps a high-water per
// slot. A lock of that name is the slot (KeysFor).
func PermitName(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// ParsePermitName reads a permit's name: the semaphore's name and the
// slot; ok is false for a name that is no permit's.
func ParsePermitName(key string) (name string, slot int, ok bool) {
	i := strings.LastIndexByte(key, '#')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[i+1:])
	if err != nil || n < 0 || n >= MaxPermits || strconv.Itoa(n) != key[i+1:] {
		return "", 0, false
	}
	return key[:i], n, true
}

// PermitResult is a semaphore try's reply: a TryResult and, when got, the
// slot.
type PermitResult struct {
	TryResult
	Slot int // -1 when not got
}

// AcquirePermit runs one try to take a permit of s (sem_acquire.lua). A
// fair try's rules apply to the semaphore's one queue; t.Fair is ignored
// (a semaphore is always fair), t.Unfenced refused.
func AcquirePermit(ctx context.Context, c redis.Scripter, s Semaphore, t Try) (PermitResult, error) {
	if t.Unfenced {
		return PermitResult{}, errors.New("protocol: a semaphore's permits are fenced")
	}
	a := ""
	if t.Attempt != 0 {
		a = t.Attempt.String()
	}
	tt := ticketTTLArg
	if t.ticketTTL != 0 {
		tt = ms(t.ticketTTL)
	}
	v, err := semAcquire.Run(ctx, c, s.all, t.Holder, ms(t.TTL), ms(t.Counter.TTL), flag(t.Counter.ClockFloor),
		tt, a, s.N, s.Keys.Channel, t.PubSub.spublish()).Result()
	if err != nil {
		return PermitResult{Slot: -1}, err
	}
	return ParsePermitReply(v, s.N)
}

// ParsePermitReply reads sem_acquire.lua's reply for a semaphore of n. A
// slot may be past n (any below MaxPermits): a holder's slot from a client
// with a larger N.
func ParsePermitReply(reply any, n int) (PermitResult, error) {
	v, ok := reply.([]any)
	if !ok || len(v) != 3 {
		return PermitResult{Slot: -1}, fmt.Errorf("semaphore script: unexpected reply %v", reply)
	}
	res, err := ParseTryReply(v[:2])
	slot, ok := v[2].(int64)
	switch {
	case err != nil:
		return PermitResult{Slot: -1}, err
	case !ok || slot < -1 || slot >= MaxPermits || res.Got() != (slot >= 0):
		return PermitResult{Slot: -1}, fmt.Errorf("semaphore script: unexpected reply %v", reply)
	case res.Got() && res.Seq == 0:
		return PermitResult{Slot: -1}, fmt.Errorf("semaphore script: seq 0 in %v", reply)
	}
	return PermitResult{TryResult: res, Slot: int(slot)}, nil
}

// LeavePermit is a semaphore's waiter giving up (sem_leave.lua): it drops
// its ticket and, with passOn, lets go of a slot handed to it meanwhile,
// as a release does. It reports whether it released a slot.
func LeavePermit(ctx context.Context, c redis.Scripter, s Semaphore, r Release, passOn bool) (bool, error) {
	n, err := semLeave.Run(ctx, c, s.all, r.Holder, s.Keys.Channel, ms(r.Counter.TTL), flag(r.Counter.ClockFloor),
		r.PubSub.spublish(), flag(passOn), s.N).Int64()
	return n == 1, err
}

// MaxListed is how many of a semaphore's queued waiters InspectSemaphore
// lists.
const MaxListed = 100

// SemaphoreState is a semaphore's state at one instant.
type SemaphoreState struct {
	// Permits is the N the last try wrote (0 when missing): the slots a
	// release hands on are those below it.
	Permits int
	// Slots is each slot's state (Holder, Seq, PTTL, LastSeq), for the
	// first N slots of the Semaphore read.
	Slots []State
	// Queued is the queue's length, live or not yet dropped.
	Queued int
	// Queue is its first waiters (at most MaxListed), in order, each with
	// its ticket (the zero Ticket when it has none or it does not parse).
	Queue []Waiter
}

// Waiter is one queued waiter of a semaphore.
type Waiter struct {
	Holder string
	Ticket Ticket
}

// InspectSemaphore reads s's state in one atomic step.
func InspectSemaphore(ctx context.Context, c redis.Scripter, s Semaphore) (SemaphoreState, error) {
	v, err := semInspect.Run(ctx, c, s.all, s.N, MaxListed).Slice()
	if err != nil {
		return SemaphoreState{}, err
	}
	bad := func() (SemaphoreState, error) {
		return SemaphoreState{}, fmt.Errorf("semaphore inspect script: unexpected reply %v", v)
	}
	if len(v) != 7 {
		return bad()
	}
	vals, ok1 := v[1].([]any)
	pttls, ok2 := v[2].([]any)
	ctrs, ok3 := v[3].([]any)
	queued, ok4 := v[4].(int64)
	ids, ok5 := v[5].([]any)
	ts, ok6 := v[6].([]any)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || len(vals) != s.N || len(pttls) != s.N || len(ctrs) != s.N {
		return bad()
	}
	var st SemaphoreState
	if p, ok := v[0].(string); ok {
		st.Permits, _ = strconv.Atoi(p)
	}
	st.Queued = int(queued)
	st.Slots = make([]State, s.N)
	for i := range s.N {
		sl := &st.Slots[i]
		if val, ok := vals[i].(string); ok {
			if sl.Holder, sl.Seq, err = ParseLockValue(val); err != nil {
				return SemaphoreState{}, fmt.Errorf("slot %d: %w", i, err)
			}
			switch p, _ := pttls[i].(int64); {
			case p > 0:
				sl.PTTL = time.Duration(p) * time.Millisecond
			case p == -1:
				sl.PTTL = NoTTL
			}
		}
		if c, ok := ctrs[i].(string); ok {
			sl.LastSeq, _ = strconv.ParseUint(c, 10, 64)
		}
	}
	for i, id := range ids {
		h, _ := id.(string)
		w := Waiter{Holder: h}
		if i < len(ts) {
			if t, ok := ts[i].(string); ok {
				w.Ticket, _ = ParseTicket(t)
			}
		}
		st.Queue = append(st.Queue, w)
	}
	return st, nil
}
