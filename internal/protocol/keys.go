package protocol

import "strings"

// Keys are the Redis keys of one lock. Name sits in a hash tag so all of
// them live in one Redis Cluster slot.
type Keys struct {
	Lock    string // PREFIX{NAME}: holds "holder:seq" with a PX ttl
	Counter string // PREFIX{NAME}:fence: the fencing counter
	Queue   string // PREFIX{NAME}:queue: fair waiters by arrival (sorted set)
	Tickets string // PREFIX{NAME}:tickets: fair waiters' tickets (hash)
	Channel string // PREFIX{NAME}:release: pub/sub channel, a message per release
	// Ahead, PREFIX{NAME}:ahead, exists while the counter may be above the
	// server's clock; while it is missing a try needs no clock.
	Ahead string
	// Waiting, PREFIX{NAME}:waiting, exists while the queue may hold a
	// waiter; while it is missing a fair try and release skip the queue.
	Waiting string

	cache *lockArgs // what the lock's calls repeat (args.go); nil when built by hand

	// permit is, for one slot of a semaphore (Semaphore.Slot), the
	// semaphore's permits key and the slot: its release hands the slot on
	// (release_fair.lua with the slot). "" for a lock.
	permit permitOf
}

// permitOf names a semaphore's slot: its permits key and its index.
type permitOf struct {
	permits string
	slot    int
}

// KeysFor returns the keys of lock name under prefix. The name must have
// passed fence.ValidateKey (no braces).
//
// A name of the form NAME#i ([ParsePermitName]) is slot i of the
// semaphore NAME, and has its keys ([Semaphore.Slot]): a lock name is one
// set of keys and one counter, so that a verifier's high-water for the
// name, Inspect, Advance and the command's tools all reach the slot.
//
// The keys are slices of one string, built with one allocation instead of
// seven: Lock is the start of Counter. A second one holds what the lock's
// script calls repeat (their KEYS lists, the boxed holder id, channel and
// ttls, an argument list to lend), so that each call allocates less.
func KeysFor(prefix, name string) Keys {
	const (
		fenceSfx   = ":fence"
		queueSfx   = ":queue"
		ticketsSfx = ":tickets"
		releaseSfx = ":release"
		aheadSfx   = ":ahead"
		waitingSfx = ":waiting"
	)
	if sem, i, ok := ParsePermitName(name); ok {
		return slotKeys(prefix+"{"+sem+"}#", i)
	}
	n := len(prefix) + len(name) + 2 // PREFIX{NAME}
	var b strings.Builder
	b.Grow(6*n + len(fenceSfx) + len(queueSfx) + len(ticketsSfx) + len(releaseSfx) + len(aheadSfx) + len(waitingSfx))
	for _, sfx := range [...]string{fenceSfx, queueSfx, ticketsSfx, releaseSfx, aheadSfx, waitingSfx} {
		b.WriteString(prefix)
		b.WriteByte('{')
		b.WriteString(name)
		b.WriteByte('}')
		b.WriteString(sfx)
	}
	s := b.String()
	counter, s := s[:n+len(fenceSfx)], s[n+len(fenceSfx):]
	queue, s := s[:n+len(queueSfx)], s[n+len(queueSfx):]
	tickets, s := s[:n+len(ticketsSfx)], s[n+len(ticketsSfx):]
	channel, s := s[:n+len(releaseSfx)], s[n+len(releaseSfx):]
	ahead, waiting := s[:n+len(aheadSfx)], s[n+len(aheadSfx):]
	k := Keys{Lock: counter[:n], Counter: counter, Queue: queue, Tickets: tickets, Channel: channel, Ahead: ahead, Waiting: waiting}
	k.cache = newLockArgs(k)
	return k
}
