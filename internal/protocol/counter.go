package protocol

import (
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/sentinel"
)

// Counter is how a lock's counter is kept. Every script that writes a
// counter follows one rule whatever the caller's settings (the rule and its
// limits are stated for users in package lease's doc, "The counter rule"):
// a missing counter stands at the server's clock in microseconds (Redis
// TIME), and a counter is never given a ttl shorter than the time until
// the clock passes its value (store_counter in common.lua).
type Counter struct {
	// TTL is the counter's ttl after each write; 0 keeps it forever. Clients
	// with different TTLs may share a lock: the rule holds for any mix.
	TTL time.Duration
	// ClockFloor lifts the counter to the clock before every increment, so
	// a counter that went back while it exists (a failover to a replica
	// that missed the last increments) jumps ahead again.
	ClockFloor bool
}

// appendArgs appends the counter's script arguments to a: ttl ms (boxed
// in l), clock floor. a has room for all the call's arguments (l.list).
func (c Counter) appendArgs(a []any, l *lockArgs) []any {
	return append(a, l.counterTTL.of(ms(c.TTL)), flag(c.ClockFloor))
}

// MaxAhead is how far above the server's clock (Redis TIME, in µs) Advance,
// Reissue and Adopt may lift a lock's counter. Tokens follow the clock (a
// counter starts there, and grows by one per acquisition), so every
// legitimate floor is near it; a floor further ahead is a forged or
// mistyped high-water, which would leave the lock few tokens (2^53-1 is
// the last) or none. The scripts refuse it with ErrPoisoned (common.lua's
// MAX_AHEAD).
const MaxAhead = 24 * time.Hour

// TooFarAhead reports whether seq is more than MaxAhead above clock, in the
// counter's unit (µs): a poisoned high-water or counter.
func TooFarAhead(seq uint64, clock time.Time) bool {
	return seq > CounterLimit(clock)
}

// CounterLimit is the highest counter that is not poisoned on a server
// whose clock reads clock: the clock in µs plus MaxAhead.
func CounterLimit(clock time.Time) uint64 {
	return Micros(clock) + uint64(MaxAhead/time.Microsecond)
}

// Micros is t in µs since the Unix epoch (0 before it): the Seq that a
// counter starting at the clock gets at t.
func Micros(t time.Time) uint64 { return uint64(max(t.UnixMicro(), 0)) }

// ErrPoisoned is a script's refusal to lift a counter more than MaxAhead
// above the server's clock. lease exports it as lease.ErrPoisoned.
var ErrPoisoned error = sentinel.New("lease: poisoned high-water", nil)

// poisonedPrefix starts the scripts' error reply for a floor past MaxAhead.
const poisonedPrefix = "fencelock: poisoned: "

// poisonedError is that reply, read as ErrPoisoned.
type poisonedError struct{ reply redis.Error }

func (e poisonedError) Error() string {
	return ErrPoisoned.Error() + ": " + strings.TrimPrefix(e.reply.Error(), poisonedPrefix)
}

// Unwrap returns ErrPoisoned and the reply.
func (e poisonedError) Unwrap() []error { return []error{ErrPoisoned, e.reply} }

// counterErr reads a counter script's error: a refused floor is ErrPoisoned.
func counterErr(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), poisonedPrefix) {
		return poisonedError{rerr}
	}
	return err
}
