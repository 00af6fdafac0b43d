package family

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/observe"
)

// Strategy is what differs between one Redis and a quorum of masters under
// package lease's one client, one lease type and one wait loop: how a try,
// a release, a refresh, a reissue and the wake-ups of waiters are done.
type Strategy interface {
	// Kind names the kind in hooks' events.
	Kind() observe.Kind
	// Begin starts one validated acquisition; its tries share its state.
	Begin(r Request) Attempt
	// Inspect reads a lock's state.
	Inspect(ctx context.Context, name string) (State, error)
	// Advance lifts a lock's counter to at least floor.
	Advance(ctx context.Context, name string, floor uint64) (uint64, error)
	// Close stops the transport's senders once the client's cleanups are
	// done, waiting for them until ctx ends.
	Close(ctx context.Context) error
}

// Request is one validated acquisition.
type Request struct {
	Name string
	TTL  time.Duration
	// Holder is WithHolder's id, "" for a fresh one.
	Holder string
	// Waiting: Acquire, which waits (and, on a fair lock, queues), rather
	// than TryAcquire.
	Waiting bool
	// Pending counts the kind's background cleanups; Close waits for them.
	Pending *lifetime.Pending
	// Semaphore, when set, makes Name a semaphore of Semaphore.N permits
	// (one Redis only): a try takes one of its slots, always fairly. Its
	// keys are built once per semaphore, not per acquisition.
	Semaphore *protocol.Semaphore
}

// Grant is the lock a try obtained.
type Grant struct {
	Token fence.Token
	// Start is the moment the lease counts from: the send of the try that
	// won the lock, or of the try whose ticket a handoff used.
	Start time.Time
	// Backend refreshes, releases and reissues the lease.
	Backend lifetime.Backend
	// Claim, when set, is below the ttl: the lock was handed over for this
	// claim window only, and the lease confirms it to the ttl in the
	// background (lifetime.StartClaim).
	Claim time.Duration
}

// Miss is what a try that did not get the lock found.
type Miss struct {
	// Remaining is when the lock may be free (a holder's remaining ttl, or
	// when a majority of nodes will be); 0 when unknown.
	Remaining time.Duration
	// Queued: the lock is free but reserved for fair waiters ahead.
	Queued bool
	// Poll, when set, replaces the backoff: a fair waiter, told of its
	// handoff by message, polls only to renew its ticket and find lost
	// messages.
	Poll time.Duration
	// Unavailable: the lock service failed (an I/O error, a majority of
	// nodes down): the waiting acquire returns the try's error at once.
	Unavailable bool
	// NoMajority: a majority of nodes failed to answer; a waiting acquire
	// whose every try for a whole ttl did so gives up.
	NoMajority bool
}

// Attempt is one acquisition across its tries.
type Attempt interface {
	// Try makes one try. With a nil Grant and a nil error, the lock is
	// busy (Miss says more). A try undoes, in the background, whatever it
	// may have taken when it fails.
	Try(ctx context.Context) (*Grant, Miss, error)
	// Joined returns a Waker at no I/O cost when the client already
	// listens for this lock's releases; nil otherwise.
	Joined() Waker
	// Listen starts listening for the lock's releases, waiting briefly for
	// the subscription so that the next try cannot miss one.
	Listen(ctx context.Context) Waker
	// Abandon undoes what a waiting acquire that gives up leaves behind
	// (a fair waiter's ticket, a lock handed to it meanwhile).
	Abandon(ctx context.Context)
}

// Waker wakes a waiting acquire.
type Waker interface {
	// Wait blocks for d, or until a release wakes this waiter (woken), or
	// until ctx ends (its error). A release that handed the lock to this
	// waiter returns the grant.
	Wait(ctx context.Context, d time.Duration, m Miss) (g *Grant, woken bool, err error)
	// BeforeTry drops wake-ups that the coming try makes moot.
	BeforeTry()
	// Got drops wake-ups the try that got the lock made moot.
	Got()
	// Close stops listening.
	Close()
}

// State is a lock's state as a kind reads it.
type State struct {
	Holder  string
	Seq     uint64
	TTL     time.Duration
	LastSeq uint64
	Queued  int
	Head    string // the fair queue's first waiter, "" when none
	// Nodes is each node's own view, for a quorum of masters.
	Nodes []NodeState
}

// NodeState is one node's view of a lock.
type NodeState struct {
	Addr  string
	State State
	Err   error
}
