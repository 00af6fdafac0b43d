package redlock

import "errors"

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
