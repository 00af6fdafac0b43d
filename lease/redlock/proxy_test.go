package redlock_test

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// newDelayProxy starts a proxy to backend that holds every chunk of bytes,
// in both directions, for delay before passing it on: a network with a
// round-trip time of 2×delay, on loopback. Sleeping costs no CPU, so on a
// small machine it shows whether a fan-out to several servers runs in
// parallel (latency ≈ one round trip) or in series (≈ N round trips), which
// loopback alone cannot: there, the servers compete for the same few cores.
// It stops at cleanup.
func newDelayProxy(tb testing.TB, backend string, delay time.Duration) *faults.Proxy {
	tb.Helper()
	p := faults.NewProxy(tb, backend)
	p.Delay(delay)
	p.DelayReplies(delay)
	return p
}
