package protocol

import "sync/atomic"

// lockArgs is what the script calls on one lock repeat, built or boxed once
// per [Keys] instead of once per call: the KEYS lists, and the holder id and
// the ttls as boxed the last time (an attempt's tries, its lease's refreshes
// and release pass the same ones). Safe for concurrent use.
type lockArgs struct {
	// keys is Lock, Counter, Ahead, Queue, Tickets, Waiting and, for a
	// semaphore's slot, its permits key: the fair scripts' KEYS (a slot's
	// release: all seven); its start is the others'.
	keys       [7]string
	holder     box[string]
	channel    box[string]
	ttl        box[int64] // the lock's ttl in ms
	counterTTL box[int64] // the counter's ttl in ms
	buf        argList
}

// newLockArgs returns the lockArgs of k.
func newLockArgs(k Keys) *lockArgs {
	return &lockArgs{keys: k.all()}
}

// args returns k's lockArgs: the ones KeysFor made, or, for Keys built or
// changed by hand, new ones.
func (k Keys) args() *lockArgs {
	a := k.cache
	if a == nil || a.keys != k.all() {
		return newLockArgs(k)
	}
	return a
}

// The KEYS lists of the scripts are parts of one array, which no caller
// changes: the capacity stops an append from writing into it.

// lock is the KEYS of the scripts that touch the lock alone.
func (l *lockArgs) lock() []string { return l.keys[:1:1] }

// lockCounter is the KEYS of the scripts that touch the lock and its counter.
func (l *lockArgs) lockCounter() []string { return l.keys[:3:3] }

// fair is the KEYS of the fair lock's scripts.
func (l *lockArgs) fair() []string { return l.keys[:6:6] }

// release is the KEYS of release_fair.lua: a slot's names its permits key.
func (l *lockArgs) release() []string {
	if l.keys[6] != "" {
		return l.keys[:]
	}
	return l.keys[:6:6]
}

// all is k's keys as lockArgs keeps them.
func (k Keys) all() [7]string {
	return [7]string{k.Lock, k.Counter, k.Ahead, k.Queue, k.Tickets, k.Waiting, k.permit.permits}
}

// argList is an argument list that one call at a time may borrow.
type argList struct {
	busy atomic.Bool
	a    [8]any // as many as a script takes
}

// list lends a call an empty argument list: the lock's own while no other
// call has it, a new one otherwise. The call gives it back with free once
// it has returned: go-redis copies the arguments into the command it
// builds (and internal/transport into the one it batches), so that nothing
// holds the list by then. A client wrapper that kept the args or the keys
// of a call past its return would break this; go-redis's clients do not.
func (l *lockArgs) list() []any {
	if l.buf.busy.CompareAndSwap(false, true) {
		return l.buf.a[:0]
	}
	return make([]any, 0, len(l.buf.a))
}

// free gives back a list from list.
func (l *lockArgs) free(a []any) {
	if cap(a) == len(l.buf.a) && &a[:1][0] == &l.buf.a[0] {
		clear(l.buf.a[:]) // keeps no holder id alive
		l.buf.busy.Store(false)
	}
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
