package protocol

import "time"

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

// appendArgs appends the counter's script arguments to a: ttl ms, clock
// floor. The callers size a for all their arguments: one allocation.
func (c Counter) appendArgs(a []any) []any { return append(a, ms(c.TTL), flag(c.ClockFloor)) }
