package transport

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/sentinel"
)

// Sent is what a call did to the server, as far as the caller can know.
type Sent uint8

const (
	// NotSent: the call surely did not run. Nothing to undo.
	NotSent Sent = iota
	// MayHaveRun: the call may have run, its reply lost (a timeout, a
	// cancel, a connection broken after the write). Its effect must be
	// undone.
	MayHaveRun
	// Ran: the server answered.
	Ran
)

// SentOf says what a call that returned err did, given whether its context
// had already ended when it was made (then it was not made). This is the
// one rule for every kind and every node: a call with an error reply from
// Redis ran (and our scripts fail before they write); a connection that was
// never made (refused, no route, dial timeout), a pool that had no
// connection to give, or a closed client did not send it; anything else
// may have run.
func SentOf(err error) Sent {
	if err == nil {
		return Ran // before the targets of errors.As, which escape
	}
	var rerr redis.Error
	var operr *net.OpError
	switch {
	case errors.As(err, &rerr):
		return Ran
	case errors.As(err, &operr) && operr.Op == "dial":
		return NotSent
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed), errors.Is(err, errSkipped):
		return NotSent
	}
	return MayHaveRun
}

// errSkipped is the error of a call that Call did not make.
var errSkipped = errors.New("not sent: the context had ended")

// Call runs call under ctx unless ctx has already ended, and returns what
// it did: a call whose context ended before it began is not made at all,
// so it surely did not run.
func Call[T any](ctx context.Context, call func(context.Context) (T, error)) (T, Sent, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, NotSent, sentinel.Join(err, errSkipped)
	}
	v, err := call(ctx)
	return v, SentOf(err), err
}

// Plain is call, whose Sent is read from its error by SentOf.
func Plain[T any](call func(context.Context) (T, error)) func(context.Context) (T, Sent, error) {
	return func(ctx context.Context) (T, Sent, error) {
		v, err := call(ctx)
		return v, SentOf(err), err
	}
}
