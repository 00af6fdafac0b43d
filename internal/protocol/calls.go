// Package script holds the Lua scripts behind the lease and redlock, and
// typed wrappers around them. Each script is one atomic round trip; go-redis
// runs it with EVALSHA and falls back to EVAL when the server's script cache
// is empty (after SCRIPT FLUSH or a restart).
package script

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	commonSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed advance.lua
	advanceSrc string

	// The acquire and release scripts share common.lua's functions.
	acquire = redis.NewScript(commonSrc + acquireSrc)
	refresh = redis.NewScript(refreshSrc)
	release = redis.NewScript(commonSrc + releaseSrc)
	inspect = redis.NewScript(inspectSrc)
	advance = redis.NewScript(advanceSrc)
)

// Keys are the Redis keys of one lock. Name sits in a hash tag so all of them
// live in one Redis Cluster slot.
type Keys struct {
	Lock    string // PREFIX{NAME}: holds "holder:seq" with a PX ttl
	Counter string // PREFIX{NAME}:fence: the fencing counter
	Queue   string // PREFIX{NAME}:queue: fair waiters by arrival (sorted set)
	Tickets string // PREFIX{NAME}:tickets: fair waiters' tickets (hash)
	Channel string // PREFIX{NAME}:release: pub/sub channel, a message per release
}

// KeysFor returns the keys of lock name under prefix.
func KeysFor(prefix, name string) Keys {
	lock := prefix + "{" + name + "}"
	return Keys{Lock: lock, Counter: lock + ":fence", Queue: lock + ":queue", Tickets: lock + ":tickets",
		Channel: lock + ":release"}
}

// all is the KEYS of the acquire and release scripts.
func (k Keys) all() []string { return []string{k.Lock, k.Counter, k.Queue, k.Tickets} }

// AcquireArgs are the inputs of one acquire.
type AcquireArgs struct {
	Holder     string
	TTL        time.Duration
	ClockFloor bool          // lift the counter to Redis TIME in µs before INCR
	CounterTTL time.Duration // 0: the counter never expires
	Reacquire  bool          // the holder may already hold the lock
	Unfenced   bool          // no counter: Seq is 0 (an efficiency lock)
	Fair       bool          // FIFO: a free lock goes to the head of the queue
	TicketTTL  time.Duration // fair: how long a waiter's ticket lives
	Enqueue    bool          // fair: queue when not acquired
}

// Queued is AcquireResult.PTTL when the lock is free but reserved for the
// fair waiters queued ahead.
const Queued = -3 * time.Millisecond

// AcquireResult is what the acquire script found.
type AcquireResult struct {
	Acquired   bool          // the lock is ours (new or re-acquired)
	Reacquired bool          // we already held it; Seq is the token we had
	Seq        uint64        // valid when Acquired; 0 when Unfenced
	PTTL       time.Duration // when not Acquired: the holder's remaining ttl (<0: none)
}

// Acquire runs the acquire script.
func Acquire(ctx context.Context, c redis.Scripter, k Keys, a AcquireArgs) (AcquireResult, error) {
	v, err := acquire.Run(ctx, c, k.all(), acquireArgs(a)...).Result()
	if err != nil {
		return AcquireResult{}, err
	}
	res, err := parseAcquire(v)
	if err == nil && res.Acquired && res.Seq == 0 && !a.Unfenced {
		// a fenced acquire never hands out Seq 0 (an unfenced lock's
		// value, re-acquired by a fenced client under the same prefix)
		return AcquireResult{}, fmt.Errorf("acquire script: seq 0 for a fenced lock %q: the lock was taken unfenced", k.Lock)
	}
	return res, err
}

func acquireArgs(a AcquireArgs) []any {
	return []any{a.Holder, ms(a.TTL), flag(a.ClockFloor), ms(a.CounterTTL), flag(a.Reacquire), flag(a.Unfenced),
		flag(a.Fair), ms(a.TicketTTL), flag(a.Enqueue)}
}

func parseAcquire(reply any) (AcquireResult, error) {
	v, ok := reply.([]any)
	if !ok || len(v) != 2 {
		return AcquireResult{}, fmt.Errorf("acquire script: unexpected reply %v", v)
	}
	code, _ := v[0].(int64)
	n, _ := v[1].(int64)
	switch code {
	case 1, 2:
		if n < 0 {
			return AcquireResult{}, fmt.Errorf("acquire script: bad seq %d", n)
		}
		return AcquireResult{Acquired: true, Reacquired: code == 2, Seq: uint64(n)}, nil
	case 0:
		return AcquireResult{PTTL: time.Duration(n) * time.Millisecond}, nil
	}
	return AcquireResult{}, fmt.Errorf("acquire script: unexpected reply %v", v)
}

// Refresh sets the lock's ttl if holder still has it, and reports whether it did.
func Refresh(ctx context.Context, c redis.Scripter, k Keys, holder string, ttl time.Duration) (bool, error) {
	n, err := refresh.Run(ctx, c, []string{k.Lock}, holder, ms(ttl)).Int64()
	return n == 1, err
}

// Release deletes the lock if holder still has it, publishes a wake-up on
// its channel, and reports whether it did.
func Release(ctx context.Context, c redis.Scripter, k Keys, holder string) (bool, error) {
	return ReleaseFair(ctx, c, k, holder, AcquireArgs{})
}

// ReleaseFair is Release for a lock whose acquires use a (Fair, ClockFloor
// and CounterTTL as in a): a fair lock goes straight to the live head of the
// queue with a new token, and the message names that waiter.
func ReleaseFair(ctx context.Context, c redis.Scripter, k Keys, holder string, a AcquireArgs) (bool, error) {
	return releaseRun(ctx, c, k, holder, a, "0")
}

// Leave is ReleaseFair for a waiter that gives up: it also drops holder's
// ticket, and if the lock was handed to holder meanwhile, passes it on. A
// re-acquire (a.Reacquire) only drops the ticket: the lock under that
// holder id may be one the caller held before, and is not Leave's to take.
func Leave(ctx context.Context, c redis.Scripter, k Keys, holder string, a AcquireArgs) (bool, error) {
	mode := "1"
	if a.Reacquire {
		mode = "2"
	}
	return releaseRun(ctx, c, k, holder, a, mode)
}

func releaseRun(ctx context.Context, c redis.Scripter, k Keys, holder string, a AcquireArgs, leave string) (bool, error) {
	n, err := release.Run(ctx, c, k.all(), holder, k.Channel, flag(a.Fair), flag(a.ClockFloor), ms(a.CounterTTL),
		leave, flag(sharded(c))).Int64()
	return n == 1, err
}

// sharded reports whether the release script publishes on c with SPUBLISH
// rather than PUBLISH: on a Redis Cluster client, whose waiters listen with
// SSUBSCRIBE (see package notify). On a cluster without sharded pub/sub,
// the script falls back to PUBLISH, as the waiters fall back to SUBSCRIBE.
func sharded(c redis.Scripter) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

// Advance lifts the counter to at least floor and returns its value afterwards.
func Advance(ctx context.Context, c redis.Scripter, k Keys, floor uint64) (uint64, error) {
	n, err := advance.Run(ctx, c, []string{k.Counter}, floor).Int64()
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// State is a lock's state at one instant.
type State struct {
	Holder  string        // "" when free
	Seq     uint64        // the holder's token Seq; 0 when free
	PTTL    time.Duration // remaining ttl; 0 when free
	LastSeq uint64        // the counter: the last Seq issued (0 when absent)
}

// Inspect reads the lock's state in one atomic step.
func Inspect(ctx context.Context, c redis.Scripter, k Keys) (State, error) {
	v, err := inspect.Run(ctx, c, []string{k.Lock, k.Counter}).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return State{}, err
	}
	if len(v) != 3 {
		return State{}, fmt.Errorf("inspect script: unexpected reply %v", v)
	}
	var s State
	if val, ok := v[0].(string); ok {
		h, seq, ok := strings.Cut(val, ":")
		if !ok {
			return State{}, fmt.Errorf("inspect script: lock value %q is not holder:seq", val)
		}
		s.Holder = h
		s.Seq, _ = strconv.ParseUint(seq, 10, 64)
		if p, _ := v[1].(int64); p > 0 {
			s.PTTL = time.Duration(p) * time.Millisecond
		}
	}
	if c, ok := v[2].(string); ok {
		s.LastSeq, err = strconv.ParseUint(c, 10, 64)
		if err != nil {
			return State{}, fmt.Errorf("inspect script: counter %q: %w", c, err)
		}
	}
	return s, nil
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// MayHaveRun reports whether a failed call may still have run on the
// server, so that its effect (a lock taken) must be undone: anything but an
// error reply from Redis itself or a connection that was never made
// (refused, no route, dial timeout). A timeout, a cancelled context or a
// broken connection after the request was written leave it open.
func MayHaveRun(err error) bool {
	var rerr redis.Error
	var operr *net.OpError
	switch {
	case err == nil:
		return false
	case errors.As(err, &rerr):
		return false
	case errors.As(err, &operr) && operr.Op == "dial":
		return false
	}
	return true
}

// AcquireUnfenced takes an unfenced lock (no counter, Seq 0) with a plain
// SET NX PX: the same key and value as the acquire script with Unfenced, at
// the cost of a command instead of a script. When the lock is held, a second
// round trip reads its PTTL, so that a waiter knows when it expires (only
// the contended path pays it).
func AcquireUnfenced(ctx context.Context, c redis.Cmdable, k Keys, holder string, ttl time.Duration) (AcquireResult, error) {
	ok, err := c.SetNX(ctx, k.Lock, holder+":0", ttl).Result()
	if err != nil {
		return AcquireResult{}, err
	}
	if ok {
		return AcquireResult{Acquired: true}, nil
	}
	pttl, err := c.PTTL(ctx, k.Lock).Result()
	if err != nil {
		return AcquireResult{PTTL: -1}, nil // held; when it expires is unknown
	}
	return AcquireResult{PTTL: pttl}, nil
}
