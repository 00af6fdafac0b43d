package protocol

import "sync/atomic"

// lockArgs is what the script calls on one lock repeat, built or boxed once
// per [Keys] instead of once per call: the KEYS lists, and the holder id and
// the ttls as boxed the last time (an attempt's tries, its lease's refreshes
// and release pass the same ones). Safe for concurrent use.
type lockArgs struct {
	// keys is Lock, Counter, Ahead, Queue, Tickets, Waiting: the fair
	// scripts' KEYS; its start is the others'.
	keys       [6]string
	holder     box[string]
	channel    box[string]
	ttl        box[int64] // the lock's ttl in ms
	counterTTL box[int64] // the counter's ttl in ms
}

// newLockArgs returns the lockArgs of k.
func newLockArgs(k Keys) *lockArgs {
	return &lockArgs{keys: [6]string{k.Lock, k.Counter, k.Ahead, k.Queue, k.Tickets, k.Waiting}}
}

// args returns k's lockArgs: the ones KeysFor made, or, for Keys built or
// changed by hand, new ones.
func (k Keys) args() *lockArgs {
	a := k.cache
	if a == nil || a.keys != [6]string{k.Lock, k.Counter, k.Ahead, k.Queue, k.Tickets, k.Waiting} {
		return newLockArgs(k)
	}
	return a
}

// box keeps the value last boxed as a script argument (an any), so that a
// call repeating it boxes nothing.
type box[T comparable] struct{ v atomic.Value }

// of returns x as an any: the kept one when it holds x.
func (b *box[T]) of(x T) any {
	if v := b.v.Load(); v != nil && v.(T) == x {
		return v
	}
	v := any(x)
	b.v.Store(v)
	return v
}

// The script flags, boxed once.
var (
	flagTrue  any = "1"
	flagFalse any = "0"
)

// flag is b as a script flag: "1" or "0".
func flag(b bool) any {
	if b {
		return flagTrue
	}
	return flagFalse
}
