package protocol

import "time"

// Counter is how a lock's counter is kept: every script that writes it
// follows one rule, whatever the caller's settings.
//
// The counter rule: a missing counter stands at the server's clock in
// microseconds (Redis TIME), so the next Seq after it expired, was evicted,
// or was lost in a restart without persistence is above every Seq it
// issued; and a counter is never given a ttl shorter than the time until
// the clock passes its value, so a counter lifted above the clock (by
// Advance, a reissue, a Redlock write-back or another node's clock) lives
// until the clock has caught up. Seqs are about 1.8e15 (today's clock in
// µs), below 2^53.
//
// Limits: the rule holds as long as the server's clock does not step back
// by more than the time that passed since the counter's last write (a
// failover to a server whose clock is behind, a clock set back by hand);
// a restart without persistence loses a counter that was lifted above the
// clock, and a failover to a replica that missed the last writes loses
// what the replica missed while the counter exists ([Counter.ClockFloor]
// covers that second case). Beyond these, the verifier's conflict rule
// keeps the data safe and Advance heals.
type Counter struct {
	// TTL is the counter's ttl after each write; 0 keeps it forever. Clients
	// with different TTLs may share a lock: the rule holds for any mix.
	TTL time.Duration
	// ClockFloor lifts the counter to the clock before every increment, so
	// a counter that went back while it exists (a failover to a replica
	// that missed the last increments) jumps ahead again.
	ClockFloor bool
}

// args are the counter's script arguments: ttl ms, clock floor.
func (c Counter) args() []any { return []any{ms(c.TTL), flag(c.ClockFloor)} }
