package protocol_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
)

// rdb is the Redis that TestMain starts (or REDIS_URL): the scripts run on
// it directly, through the package's Go functions.
var rdb redis.UniversalClient

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c, stop, err := testenv.RedisOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "protocol tests:", err)
		os.Exit(1)
	}
	rdb = c
	code := m.Run()
	stop()
	os.Exit(code)
}

// maxSeq is 2^53-1, the highest Seq the scripts issue (Lua numbers are doubles).
const maxSeq = 1<<53 - 1

// counter is the counter setting of most tests: the lease's default ttl.
var counter = protocol.Counter{TTL: time.Hour}

// keysFor returns the keys of a lock unique to this test run.
func keysFor(t testing.TB) protocol.Keys {
	t.Helper()
	return protocol.KeysFor("fencelock-protocol-test:", t.Name()+"/"+uuid.NewString()[:8])
}

// clockUS is the server's clock (Redis TIME) in microseconds.
func clockUS(t testing.TB) uint64 {
	t.Helper()
	now, err := rdb.Time(t.Context()).Result()
	require.NoError(t, err)
	return uint64(now.UnixMicro())
}

// counterValue is the counter's value; it fails the test when it is missing.
func counterValue(t testing.TB, k protocol.Keys) uint64 {
	t.Helper()
	s, err := rdb.Get(t.Context(), k.Counter).Result()
	require.NoError(t, err, "counter %s", k.Counter)
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err, "counter %q is not a decimal integer", s)
	return n
}

// lockValue is the lock key's value, "" when it is missing.
func lockValue(t testing.TB, k protocol.Keys) string {
	t.Helper()
	v, err := rdb.Get(t.Context(), k.Lock).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return v
}

func pttl(t testing.TB, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(t.Context(), key).Result()
	require.NoError(t, err)
	return d
}

func exists(t testing.TB, key string) bool {
	t.Helper()
	n, err := rdb.Exists(t.Context(), key).Result()
	require.NoError(t, err)
	return n == 1
}

// take acquires k's lock (unfair, fenced) for holder and returns its Seq.
func take(t testing.TB, k protocol.Keys, holder string, ttl time.Duration) uint64 {
	t.Helper()
	res, err := protocol.Acquire(t.Context(), rdb, k, protocol.Try{Holder: holder, TTL: ttl, Counter: counter})
	require.NoError(t, err)
	require.Equal(t, protocol.Acquired, res.Outcome, "take %s for %s", k.Lock, holder)
	require.NotZero(t, res.Seq)
	return res.Seq
}

// subscriber receives one channel's messages.
type subscriber struct {
	t  testing.TB
	ps *redis.PubSub
}

// subscribe subscribes to k's channel (SSUBSCRIBE when sharded) and waits
// for the server's confirmation, so no message published afterwards is
// missed.
func subscribe(t testing.TB, k protocol.Keys, sharded bool) *subscriber {
	t.Helper()
	var ps *redis.PubSub
	if sharded {
		ps = rdb.SSubscribe(t.Context(), k.Channel)
	} else {
		ps = rdb.Subscribe(t.Context(), k.Channel)
	}
	t.Cleanup(func() { ps.Close() })
	v, err := ps.Receive(t.Context())
	require.NoError(t, err)
	require.IsType(t, &redis.Subscription{}, v)
	return &subscriber{t: t, ps: ps}
}

// next returns the next message's payload; ok is false when none came within wait.
func (s *subscriber) next(wait time.Duration) (payload string, ok bool) {
	s.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return "", false
		}
		v, err := s.ps.ReceiveTimeout(s.t.Context(), left)
		if err != nil {
			return "", false
		}
		if m, isMsg := v.(*redis.Message); isMsg {
			return m.Payload, true
		}
	}
}

// message returns the next message, parsed; it fails the test when none came.
func (s *subscriber) message() protocol.Message {
	s.t.Helper()
	p, ok := s.next(2 * time.Second)
	require.True(s.t, ok, "no release message")
	m, err := protocol.ParseMessage(p)
	require.NoError(s.t, err, "payload %q", p)
	return m
}

// none fails the test when a message comes within a short while.
func (s *subscriber) none() {
	s.t.Helper()
	p, ok := s.next(150 * time.Millisecond)
	require.False(s.t, ok, "unexpected release message %q", p)
}
