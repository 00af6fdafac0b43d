package redlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/batch"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

// Sentinel errors. Test for them with errors.Is. The errors this package
// returns wrap them together with the per-node errors and, where a context
// ended, ctx.Err().
//
// ErrNotAcquired, ErrLost, ErrReleased and ErrInvalid mean the same as the
// lease's errors of the same names and wrap them, so code that handles
// either kind of lock can test errors.Is(err, lease.ErrLost) for both.
var (
	// ErrNotAcquired means the lock was not obtained: fewer than a majority
	// of nodes granted it, quorum fencing could not write its Seq back to a
	// majority, or the majority came too late to leave any validity. A
	// waiting acquire that gives up because ctx ended returns an error that
	// is both ErrNotAcquired and ctx.Err(). It wraps [lease.ErrNotAcquired].
	ErrNotAcquired error = sentinel.New("redlock: not acquired", lease.ErrNotAcquired)

	// ErrLost means a lease is no longer held: its local deadline passed, a
	// refresh found it gone from a majority of nodes, or a release found it
	// gone from a majority (it had expired or been taken before the
	// release). It wraps [lease.ErrLost].
	ErrLost error = sentinel.New("redlock: lease lost", lease.ErrLost)

	// ErrReleased is a released lease's Err. It wraps [lease.ErrReleased].
	ErrReleased error = sentinel.New("redlock: lease released", lease.ErrReleased)

	// ErrInvalid is returned, before any I/O, for bad input: a bad lock name,
	// a ttl that leaves no validity, an even or too small number of nodes, a
	// nil or duplicate node, a bad option. It wraps [lease.ErrInvalid].
	ErrInvalid error = sentinel.New("redlock: invalid argument", lease.ErrInvalid)

	// ErrNodeTimeout is wrapped by the [NodeError] of a node that did not
	// answer within the per-node timeout (see [WithNodeTimeout]). It is kept
	// apart from context.DeadlineExceeded, so that errors.Is(err,
	// context.DeadlineExceeded) means the caller's context ended.
	ErrNodeTimeout = errors.New("redlock: node did not answer in time")
)

// NodeError is the failure of one node during an operation: a network
// error, a Redis error, [ErrNodeTimeout], or the caller's ctx.Err(). The
// errors of several nodes are joined with errors.Join: errors.As finds the
// first; err.Error() lists them all, one per line.
type NodeError struct {
	// Addr names the node: "host:port" for a *redis.Client (its
	// Options().Addr), else "cluster(a,b)", "ring(a,b)" or "node#i".
	Addr string
	// Err is what went wrong on that node.
	Err error
}

// Error returns "redlock: node ADDR: ERR".
func (e *NodeError) Error() string { return "redlock: node " + e.Addr + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *NodeError) Unwrap() error { return e.Err }

// nodeTimeout is the error of a node the caller stopped waiting for. The
// cause is only named, so that the error is not context.DeadlineExceeded;
// but a call that never went out (batch.ErrNotSent) stays recognisable.
func nodeTimeout(d time.Duration, cause error) error {
	switch {
	case errors.Is(cause, batch.ErrNotSent):
		return fmt.Errorf("%w (%v): %w", ErrNodeTimeout, d, batch.ErrNotSent)
	case cause == nil:
		return fmt.Errorf("%w (%v)", ErrNodeTimeout, d)
	}
	return fmt.Errorf("%w (%v): %v", ErrNodeTimeout, d, cause)
}

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }
