package testenv

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Deadline tests ("no call outlives its context") share these.
const (
	// CallDeadline is the context deadline given to the calls under test.
	CallDeadline = 300 * time.Millisecond
	// DeadlineMargin is how long after its deadline a call may return before
	// the test fails. A call that honours its context comes back within a few
	// milliseconds of it; the margin is generous only because test machines
	// are shared and noisy. Cleanup on a context of its own, which is what
	// these tests catch, costs a second or more.
	DeadlineMargin = 500 * time.Millisecond
	// SlowTimeout is the go-redis dial, read and write timeout of CtxClient:
	// far longer than CallDeadline, so that only the context can end a call
	// in time.
	SlowTimeout = 5 * time.Second
)

// CtxClient returns a go-redis client for addr that honours context
// deadlines (ContextTimeoutEnabled) and never retries a command, with slow
// timeouts of its own and dialerRetries dial attempts 100 ms apart (5
// outlast CallDeadline: on a closed port the context, not the refusal, ends
// the call). It is closed at cleanup.
func CtxClient(t testing.TB, addr string, dialerRetries int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           SlowTimeout,
		ReadTimeout:           SlowTimeout,
		WriteTimeout:          SlowTimeout,
		DialerRetries:         dialerRetries,
		DialerRetryTimeout:    100 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// ClosedAddr returns a loopback address nothing listens on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// WithinDeadline calls f with a context that ends after CallDeadline, logs
// how long f took and fails the test (without stopping it) when f returned
// more than DeadlineMargin after the deadline.
func WithinDeadline(t testing.TB, what string, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CallDeadline)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	t.Logf("%s: returned after %v (deadline %v, overshoot %v); err: %v",
		what, took.Round(time.Millisecond), CallDeadline, max(took-CallDeadline, 0).Round(time.Millisecond), err)
	if took > CallDeadline+DeadlineMargin {
		t.Errorf("%s outlived its context: returned after %v, more than the %v deadline + %v margin",
			what, took.Round(time.Millisecond), CallDeadline, DeadlineMargin)
	}
	return err
}
