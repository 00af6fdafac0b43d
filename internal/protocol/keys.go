package protocol

// Keys are the Redis keys of one lock. Name sits in a hash tag so all of
// them live in one Redis Cluster slot.
type Keys struct {
	Lock    string // PREFIX{NAME}: holds "holder:seq" with a PX ttl
	Counter string // PREFIX{NAME}:fence: the fencing counter
	Queue   string // PREFIX{NAME}:queue: fair waiters by arrival (sorted set)
	Tickets string // PREFIX{NAME}:tickets: fair waiters' tickets (hash)
	Channel string // PREFIX{NAME}:release: pub/sub channel, a message per release
}

// KeysFor returns the keys of lock name under prefix. The name must have
// passed fence.ValidateKey (no braces).
func KeysFor(prefix, name string) Keys {
	lock := prefix + "{" + name + "}"
	return Keys{Lock: lock, Counter: lock + ":fence", Queue: lock + ":queue", Tickets: lock + ":tickets",
		Channel: lock + ":release"}
}

// lockCounter is the KEYS of the scripts that touch the lock and its counter.
func (k Keys) lockCounter() []string { return []string{k.Lock, k.Counter} }

// fair is the KEYS of the fair lock's scripts.
func (k Keys) fair() []string { return []string{k.Lock, k.Counter, k.Queue, k.Tickets} }
