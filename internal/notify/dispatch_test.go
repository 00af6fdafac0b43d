package notify

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
)

// redisGoroutines counts the goroutines running go-redis's pub/sub
// Channel (its reader and its health check).
func redisGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "go-redis/v9.(*channel)")
}

// wakes reports whether w gets a wake-up within 5s.
func wakes(w *Waiter) (Wakeup, bool) {
	select {
	case u := <-w.Wake():
		return u, true
	case <-time.After(5 * time.Second):
		return Wakeup{}, false
	}
}

// TestDispatchReadsTheSocket: the goroutine that reads a classic pub/sub
// connection hands each message to its waiter itself, with no go-redis
// Channel (a reader goroutine, a Go channel and a health check's wake-up
// per message) in between; it pings the connection while it is silent, as
// that health check did; a payload that is no release message is dropped;
// and a connection the server kills is
// reconnected and subscribed again by go-redis, so waiters wake again.
func TestDispatchReadsTheSocket(t *testing.T) {
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	n := New(rdb)
	ctx := t.Context()
	w := n.Register(ctx, "ch", "h1")
	t.Cleanup(func() { n.Unregister(w) })
	require.True(t, ready(w), "subscription confirmed")
	assert.Zero(t, redisGoroutines(), "no go-redis Channel goroutine between the socket and the waiters")

	require.NoError(t, rdb.Publish(ctx, "ch", "no:release:message").Err()) // dropped, the reader goes on
	handoff := protocol.Message{Handoff: true, Holder: "h1", Seq: 7, Attempt: 3}
	require.NoError(t, rdb.Publish(ctx, "ch", handoff.String()).Err())
	u, ok := wakes(w)
	require.True(t, ok, "the handoff woke its waiter")
	assert.Equal(t, handoff, u.Msg)

	pings := func() int64 {
		s, err := rdb.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		for line := range strings.Lines(s) {
			if rest, ok := strings.CutPrefix(line, "cmdstat_ping:calls="); ok {
				calls, _, _ := strings.Cut(rest, ",")
				var n int64
				for _, d := range calls {
					n = n*10 + int64(d-'0')
				}
				return n
			}
		}
		return 0
	}
	before := pings() // the server's start-up checks ping it too
	require.Eventually(t, func() bool { return pings() > before }, pingEvery+5*time.Second, 50*time.Millisecond,
		"the silent connection is pinged")

	require.NoError(t, rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err())
	// go-redis notices at its next read, reconnects and subscribes again;
	// the waiter wakes on a message published after that.
	require.Eventually(t, func() bool {
		if err := rdb.Publish(ctx, "ch", "").Err(); err != nil {
			return false
		}
		select {
		case <-w.Wake():
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, 10*time.Second, time.Millisecond, "waiters wake again after the connection was killed")
}
