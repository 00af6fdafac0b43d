package redlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/family"
)

// ErrNodeTimeout is wrapped by the [NodeError] of a node that did not
// answer within the node timeout (see [WithNodeTimeout]). It is kept apart
// from context.DeadlineExceeded, so that errors.Is(err,
// context.DeadlineExceeded) means the caller's context ended. The other
// errors are package lease's: errors.Is(err, lease.ErrNotAcquired) and
// lease.ErrLost hold for both kinds.
var ErrNodeTimeout = errors.New("redlock: node did not answer in time")

// NodeError is the failure of one node during an operation: a network
// error, a Redis error, [ErrNodeTimeout], or the caller's ctx.Err(). The
// errors of several nodes are joined, on one line; errors.As finds the
// first.
type NodeError struct {
	// Addr names the node: "host:port" for a *redis.Client, else
	// "cluster(a,b)", "ring(a,b)" or "node#i".
	Addr string
	// Err is what went wrong on that node.
	Err error
}

// Error returns "redlock: node ADDR: ERR".
func (e *NodeError) Error() string { return "redlock: node " + e.Addr + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *NodeError) Unwrap() error { return e.Err }

// nodeTimeout is the error of a node the caller stopped waiting for; the
// cause is only named, so that the error is not context.DeadlineExceeded.
// A refused dial to the node meanwhile stays in the chain.
func nodeTimeout(d time.Duration, cause error) error {
	var dial *family.DialError
	switch {
	case cause == nil:
		return fmt.Errorf("%w (%v)", ErrNodeTimeout, d)
	case errors.As(cause, &dial):
		return family.Named(fmt.Errorf("%w (%v)", ErrNodeTimeout, d), dial)
	}
	return fmt.Errorf("%w (%v): %v", ErrNodeTimeout, d, cause)
}
