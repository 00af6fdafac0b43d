package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/quorum"
)

// MaxPermits is the most permits a [Semaphore] may have: each of its calls
// reads every permit's slot in one script, whose work grows with N.
const MaxPermits = protocol.MaxPermits

// Semaphore is N permits on one name: at most N holders at once, each
// with an ordinary [Lease] (keep-alive, a context that ends on loss, an
// idempotent Release, Reissue) and its own fencing token.
//
// # Slots and tokens
//
// The N permits are N slots, each a lock with its own counter, so its own
// tokens: a permit's lease is named for its slot, [PermitName] (NAME#i),
// and so are its tokens (Token.Key). A verifier keeps a high-water per
// token key, so per slot: once a slot passed on and its new holder wrote
// through the verifier, the writes of the holder that lost it (paused past
// its ttl) are refused. One counter for the whole semaphore could not do
// this: N holders write at once, with N different tokens, all legitimate.
// What the fence does not do: it does not order the N holders' writes
// among themselves (they are concurrent by design: the storage must allow
// N writers), and a lost holder's write that comes before its slot's next
// holder wrote anything is accepted, as with a lock. A permit's name is
// also the slot's name as a lock for the tools: [Client.Inspect] and
// [Client.Advance] of NAME#i read and lift slot i (so do the command's
// inspect, advance and repair-counter); Acquire and TryAcquire refuse it
// as a lock, with ErrInvalid. With [WithHolder], one holder id is one
// permit: a second try under an id that holds one gets it again.
//
// # Waiting
//
// A semaphore is always fair, whatever [WithFair] says: its waiters queue
// in one queue (at most 1,000, as a fair lock's), and a released permit
// goes straight to the longest live waiter, with a new token of its slot,
// told by a message (no polling). A waiter that died costs the others at
// most the claim window (min(ttl, 2s)) and a poll; a holder that died
// frees its permit when its ttl ends.
//
// # Changing N
//
// N is each Semaphore value's; a try writes it on the server when it
// changed, where a release reads it. A release hands its slot on only when
// the slot is below the N of the last try, so when N shrinks from M to N,
// the slots N..M-1 are not handed on once released: at most M hold while
// the surplus drains, at most N once it has released (a client still
// using M takes the high slots again: give every client the new N).
// Growing N opens the new slots to the next try. The stored N lapses a
// counter ttl ([WithCounterTTL]) after it last changed; a release that
// finds it missing frees its slot and wakes the waiters instead of handing
// the slot on, and their tries store N again.
//
// # Kinds
//
// A semaphore needs one Redis deployment ([New]): a client of
// lease/redlock is refused, as is one with [WithReplicaAck]. On a quorum
// the nodes' queues and slots could diverge (a waiter granted slot 1 on
// one node and slot 2 on another holds no permit on a majority, though
// permits are free), and per-slot fencing would need quorum fencing's
// write-back per slot; neither is built.
//
// Each call is one round trip uncontended, and every script's work is
// bounded by N ([MaxPermits]) and the queue's bounds.
type Semaphore struct {
	c    *Client
	name string
	keys protocol.Semaphore // built once: every call uses them
}

// Semaphore returns the semaphore of permits (1..[MaxPermits]) permits on
// name. It does no I/O. It fails with an error wrapping ErrInvalid for a
// nil client, a bad name (see fence.ValidateKey; the permits' names,
// NAME#i, must fit too), a count out of range, or a client that cannot
// keep a semaphore (lease/redlock, [WithReplicaAck]).
func (c *Client) Semaphore(name string, permits int) (*Semaphore, error) {
	if c == nil || c.s == nil {
		return nil, invalid("nil client")
	}
	if err := fence.ValidateKey(name); err != nil {
		return nil, invalid("%w", err)
	}
	if permits < 1 || permits > MaxPermits {
		return nil, invalid("semaphore %q: %d permits, want 1 to %d", name, permits, MaxPermits)
	}
	if err := fence.ValidateKey(PermitName(name, permits-1)); err != nil {
		return nil, invalid("semaphore %q: its permits' names: %w", name, err)
	}
	q, ok := c.s.(*quorum.Strategy)
	switch {
	case !ok || !q.OneRedis():
		return nil, invalid("semaphore %q: a semaphore needs one Redis, not a quorum of masters (lease/redlock): see Semaphore's doc", name)
	case c.cfg.OneRedis.Replicas > 0:
		return nil, invalid("semaphore %q: not with WithReplicaAck", name)
	}
	return &Semaphore{c: c, name: name, keys: c.cfg.Semaphore(name, permits)}, nil
}

// PermitName is the name of a semaphore's slot: the Name of the leases that
// hold it and the Key of their tokens, "NAME#slot".
func PermitName(name string, slot int) string { return protocol.PermitName(name, slot) }

// ParsePermitName reads a permit's name (a permit lease's Name, its
// tokens' Key): the semaphore's name and the slot. ok is false for a name
// that is not NAME#slot with slot in 0..MaxPermits-1.
func ParsePermitName(key string) (name string, slot int, ok bool) {
	return protocol.ParsePermitName(key)
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits is N.
func (s *Semaphore) Permits() int { return s.keys.N }

// TryAcquire tries once to take a permit for ttl. When every permit is
// held, or a free one is reserved for the waiters queued ahead, the error
// is a *HeldError wrapping ErrNotAcquired. The lease is named for the slot
// it holds ([PermitName]).
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	if s == nil {
		return nil, invalid("nil semaphore")
	}
	return s.c.tryAcquire(ctx, s.name, &s.keys, ttl, opts)
}

// Acquire takes a permit for ttl, waiting in the semaphore's queue while
// all are held: a release hands its permit to the longest waiter, which
// returns without another round trip. It behaves as [Client.Acquire] on a
// fair lock otherwise (errors, context, a waiter that gives up leaving the
// queue and passing on a permit handed to it meanwhile). With [WithHolder]
// a holder that restarted gets its permit back, with the same token.
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	if s == nil {
		return nil, invalid("nil semaphore")
	}
	return s.c.acquire(ctx, s.name, &s.keys, ttl, opts)
}

// SemaphoreInfo is a semaphore's state at one instant.
type SemaphoreInfo struct {
	Name string
	// Permits is N as the last call wrote it on the server (0 when none
	// did): a release hands on only the slots below it.
	Permits int
	// Holders are the held permits, by slot: Info.Name is the permit's
	// name (NAME#slot), and Holder, Token, TTL and LastSeq are the slot's.
	Holders []PermitInfo
	// Queued is how many waiters have a place in the queue (at most 1,000).
	Queued int
	// Queue is the holder ids of the queue's first waiters, at most 100,
	// in order: the next holders, unless their tickets expired.
	Queue []string
}

// PermitInfo is one held permit.
type PermitInfo struct {
	Slot int
	Info
}

// Inspect reads the semaphore's holders and queue in one atomic round trip.
// It reads the slots of this Semaphore's N, and any held above it is not
// shown.
func (s *Semaphore) Inspect(ctx context.Context) (SemaphoreInfo, error) {
	if s == nil {
		return SemaphoreInfo{}, invalid("nil semaphore")
	}
	if err := s.c.usable(ctx, s.name); err != nil {
		return SemaphoreInfo{}, err
	}
	st, err := s.c.s.(*quorum.Strategy).InspectSemaphore(ctx, &s.keys)
	if err != nil {
		return SemaphoreInfo{}, fmt.Errorf("lease: inspect semaphore %q: %w", s.name, err)
	}
	info := SemaphoreInfo{Name: s.name, Permits: st.Permits, Queued: st.Queued}
	for i, sl := range st.Slots {
		if sl.Holder != "" {
			info.Holders = append(info.Holders, PermitInfo{Slot: i,
				Info: infoOf(PermitName(s.name, i), sl.Holder, sl.Seq, sl.PTTL, sl.LastSeq, 0)})
		}
	}
	for _, w := range st.Queue {
		info.Queue = append(info.Queue, w.Holder)
	}
	return info, nil
}
