// Package observe is fencelock's observability hook.
//
//	hooks := &observe.Hooks{
//		AcquireDone: func(ctx context.Context, e observe.AcquireDone) {
//			log.Printf("%s %q: %s after %v", e.Kind, e.Name, e.Outcome, e.Wait)
//		},
//	}
//	locks, err := lease.New(rdb, lease.WithHooks(hooks))
//
// Lease, redlock and the verifiers report what they do (acquire start and
// end with the wait and the outcome, refresh, loss, release, and each token
// a verifier accepted or refused) to the functions of a [Hooks] value, and
// nothing else. The core imports no telemetry library; the nested module
// github.com/fencelock/fencelock/extra/fenceotel turns the events into
// OpenTelemetry metrics and spans, and a Hooks value of your own can feed
// any other system.
//
// Pass one with lease.WithHooks (for either lease kind), pgverifier.WithHooks,
// sqlverifier.WithHooks, redisverifier.WithHooks, or set verifier.Memory's
// Hooks field. Every field may be nil. The functions are called
// synchronously on the caller's goroutine (Lost on a goroutine of its own,
// since a lease can be lost by its timer): keep them fast and never block in
// them. They must be safe for concurrent use.
package observe

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// Hooks receives events. A nil *Hooks, or a nil field, reports nothing.
type Hooks struct {
	// AcquireStart is called when TryAcquire or Acquire begins. The context
	// it returns (ctx itself when it has nothing to add, a span's context
	// for a tracer) is the one the acquire's I/O runs under and the one
	// AcquireDone gets.
	AcquireStart func(ctx context.Context, e AcquireStart) context.Context
	// AcquireDone is called when TryAcquire or Acquire returns.
	AcquireDone func(ctx context.Context, e AcquireDone)
	// Refreshed is called after each Refresh, the keep-alive's included.
	Refreshed func(ctx context.Context, e Refreshed)
	// Lost is called once when a lease ends other than by Release: its
	// deadline passed, or a refresh or reissue found the lock gone.
	Lost func(e Lost)
	// Released is called after the first Release of a lease.
	Released func(ctx context.Context, e Released)
	// Verified is called after a verifier accepted or refused a token.
	Verified func(ctx context.Context, e Verified)
}

// Kind names the lease kind in events: KindLease or KindRedlock.
type Kind string

// Lease kinds.
const (
	KindLease   Kind = "lease"
	KindRedlock Kind = "redlock"
)

// AcquireStart describes an acquire that begins.
type AcquireStart struct {
	Kind Kind
	Name string
	TTL  time.Duration
	// Waiting is true for Acquire (which waits), false for TryAcquire.
	Waiting bool
}

// Outcome is how an acquire ended.
type Outcome string

// Acquire outcomes.
const (
	// Acquired: the lease was obtained.
	Acquired Outcome = "acquired"
	// Busy: another holder had the lock (TryAcquire).
	Busy Outcome = "busy"
	// Canceled: the context ended first (Acquire gave up waiting).
	Canceled Outcome = "canceled"
	// Failed: an I/O error, too few nodes, bad input.
	Failed Outcome = "failed"
)

// AcquireDone describes an acquire that returned.
type AcquireDone struct {
	AcquireStart
	Outcome Outcome
	// Token is the new lease's token; the zero Token unless Acquired.
	Token fence.Token
	// Wait is how long the call took, from AcquireStart to its return.
	Wait time.Duration
	// Attempts is how many tries the call made (1 for TryAcquire).
	Attempts int
	// Handoff is true when the lock was obtained right after a release
	// message woke the waiter: the lock passed from one holder to the next.
	Handoff bool
	// Err is the error returned; nil when Acquired.
	Err error
}

// Refreshed describes a Refresh.
type Refreshed struct {
	Kind  Kind
	Token fence.Token
	TTL   time.Duration
	// Took is how long the refresh took.
	Took time.Duration
	// KeepAlive is true for the keep-alive's own refreshes.
	KeepAlive bool
	// Err is the refresh's error: nil when the lease was extended.
	Err error
}

// Lost describes a lease that ended other than by Release.
type Lost struct {
	Kind  Kind
	Token fence.Token
	// Held is how long the lease lasted, from the start of its acquire.
	Held time.Duration
	// Err is the lease's Err: it wraps lease.ErrLost.
	Err error
}

// Released describes the first Release of a lease.
type Released struct {
	Kind  Kind
	Token fence.Token
	// Held is how long the lease lasted, from the start of its acquire to
	// the release.
	Held time.Duration
	// Took is how long the release call took.
	Took time.Duration
	// Err is Release's error (it wraps lease.ErrLost when the lock had
	// already passed on).
	Err error
}

// Verdict is what a verifier decided about a token.
type Verdict string

// Verifier verdicts.
const (
	// Accepted: the token was accepted (and the write, if any, ran).
	Accepted Verdict = "accepted"
	// Stale: refused, the resource has seen a higher Seq.
	Stale Verdict = "stale"
	// Conflict: refused, the same Seq from another holder (the lock's
	// counter went backwards).
	Conflict Verdict = "conflict"
	// Foreign: refused, the token belongs to another lock than the one the
	// resource is bound to (a *verifier.ForeignError).
	Foreign Verdict = "foreign"
	// Error: no verdict; the check failed (bad input, the storage is
	// unreachable, the write failed).
	Error Verdict = "error"
)

// Verifier names, the Verified event's Verifier.
const (
	// VerifierMemory is verifier.Memory.
	VerifierMemory = "memory"
	// VerifierPostgres is pgverifier, and sqlverifier on PostgreSQL: one
	// guard, one name.
	VerifierPostgres = "postgres"
	// VerifierMySQL is sqlverifier on MySQL or MariaDB.
	VerifierMySQL = "mysql"
	// VerifierRedis is redisverifier.
	VerifierRedis = "redis"
)

// Verified describes one check of a token by a verifier.
type Verified struct {
	// Verifier names the verifier: VerifierMemory, VerifierPostgres,
	// VerifierMySQL or VerifierRedis.
	Verifier string
	Resource string
	Token    fence.Token
	Verdict  Verdict
	// Took is how long the check (and the write it guarded) took.
	Took time.Duration
	// Err is the verifier's error; on a refusal a *verifier.StaleError,
	// which carries the resource's highest Seq, or a *verifier.ForeignError.
	Err error
}
