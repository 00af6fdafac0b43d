package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
)

// The formats' encode and decode, and the refusals of malformed input. The
// scripts are their only writers; scripts_test.go checks that what the Lua
// writes parses here.

func TestAttempt(t *testing.T) {
	for _, a := range []protocol.Attempt{1, 7, 1<<63 - 1, math.MaxUint64} {
		got, err := protocol.ParseAttempt(a.String())
		require.NoError(t, err, "%d", a)
		assert.Equal(t, a, got)
	}
	for i := 0; i < 1000; i++ {
		a := protocol.NewAttempt()
		require.NotZero(t, a)
		got, err := protocol.ParseAttempt(a.String())
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
	for _, s := range []string{"", "0", "00", "01", "-1", "+1", " 1", "1 ", "1.0", "0x10", "1_000", "abc",
		"18446744073709551616"} {
		_, err := protocol.ParseAttempt(s)
		assert.Error(t, err, "ParseAttempt(%q)", s)
	}
}

func TestMessage(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		m, err := protocol.ParseMessage("")
		require.NoError(t, err)
		assert.Equal(t, protocol.Message{}, m)
		assert.False(t, m.Handoff)
		assert.Equal(t, "", protocol.Message{}.String())
		// A plain message has no fields: String ignores any that are set.
		assert.Equal(t, "", protocol.Message{Holder: "h", Seq: 5, Attempt: 3}.String())
	})
	t.Run("handoff round trip", func(t *testing.T) {
		for _, m := range []protocol.Message{
			{Handoff: true, Holder: "h", Seq: 1, Attempt: 1},
			{Handoff: true, Holder: "host-1/worker.7@x", Seq: 1_800_000_000_000_123, Attempt: 42},
			{Handoff: true, Holder: "h", Seq: maxSeq, Attempt: math.MaxUint64},
			{Handoff: true, Holder: "h", Seq: math.MaxUint64, Attempt: protocol.NewAttempt()},
			{Handoff: true, Holder: "h", Seq: 5, Attempt: 7, Permit: true, Slot: 0},
			{Handoff: true, Holder: "h", Seq: 5, Attempt: 7, Permit: true, Slot: protocol.MaxPermits - 1},
		} {
			s := m.String()
			got, err := protocol.ParseMessage(s)
			require.NoError(t, err, "%q", s)
			assert.Equal(t, m, got, "%q", s)
		}
		assert.Equal(t, "w:1800000000000123:99",
			protocol.Message{Handoff: true, Holder: "w", Seq: 1_800_000_000_000_123, Attempt: 99}.String())
	})
	t.Run("refused", func(t *testing.T) {
		for _, s := range []string{
			"h", "h:5", "h:5:", ":5:7", "h::7", "::", ":", // missing parts
			"h:5:7:9:1", "h:5:7:", "a:b:5:7:1", // extra parts (a holder has no ':')
			"h:5:7:64", "h:5:7:-1", "h:5:7:01", "h:5:7:x", // bad slot (a semaphore's handoff)
			"h:0:7", "h:05:7", "h:00:7", "h:-5:7", "h:+5:7", "h:x:7", "h: 5:7", "h:5.0:7", // bad seq
			"h:18446744073709551616:7",           // seq past uint64
			"h:5:0", "h:5:07", "h:5:x", "h:5:-7", // bad attempt
			" ", "\n",
		} {
			_, err := protocol.ParseMessage(s)
			assert.ErrorIs(t, err, protocol.ErrMessage, "ParseMessage(%q)", s)
		}
	})
}

func TestTicket(t *testing.T) {
	for _, tk := range []protocol.Ticket{
		{Expires: time.UnixMilli(1_700_000_000_123), TTL: 30 * time.Second, Attempt: 7},
		{Expires: time.UnixMilli(1), TTL: time.Millisecond, Attempt: math.MaxUint64},
		{Expires: time.UnixMilli(0), TTL: 90 * time.Minute, Attempt: protocol.NewAttempt()},
	} {
		s := tk.String()
		got, err := protocol.ParseTicket(s)
		require.NoError(t, err, "%q", s)
		assert.True(t, tk.Expires.Equal(got.Expires), "%q: expires %v, want %v", s, got.Expires, tk.Expires)
		assert.Equal(t, tk.TTL, got.TTL, "%q", s)
		assert.Equal(t, tk.Attempt, got.Attempt, "%q", s)
		assert.Equal(t, s, got.String())
	}
	assert.Equal(t, "1700000000123:30000:7",
		protocol.Ticket{Expires: time.UnixMilli(1_700_000_000_123), TTL: 30 * time.Second, Attempt: 7}.String())
	// The stored form is to the millisecond.
	tk := protocol.Ticket{Expires: time.UnixMilli(1000).Add(999 * time.Microsecond), TTL: 1500*time.Millisecond + 999*time.Microsecond, Attempt: 1}
	assert.Equal(t, "1000:1500:1", tk.String())

	for _, s := range []string{
		"", "1", "1:2", "1:2:3:4", "::", "1::3", ":2:3", "1:2:",
		"x:2:3", "1:x:3", "1:2:x", "1.5:2:3", "1:2.5:3",
		"1:0:3", "1:-5:3", // the lock cannot be handed over with no ttl
		"1:2:0", "1:2:03", "1:2:-3", // bad attempt
	} {
		_, err := protocol.ParseTicket(s)
		assert.Error(t, err, "ParseTicket(%q)", s)
	}
}

func TestLockValue(t *testing.T) {
	for _, c := range []struct {
		holder string
		seq    uint64
	}{{"h", 0}, {"h", 1}, {"host-1/worker.7", 1_800_000_000_000_123}, {"h", maxSeq}, {"h", math.MaxUint64}} {
		v := protocol.LockValue(c.holder, c.seq)
		h, seq, err := protocol.ParseLockValue(v)
		require.NoError(t, err, "%q", v)
		assert.Equal(t, c.holder, h)
		assert.Equal(t, c.seq, seq)
	}
	assert.Equal(t, "h:1800000000000123", protocol.LockValue("h", 1_800_000_000_000_123))
	for _, v := range []string{
		"", "h", ":", ":5", "h:", "h:x", "h:-1", "h:+1", "h: 1", "h:1.0", "h:5:6", "a:b:5",
		"h:18446744073709551616",
	} {
		_, _, err := protocol.ParseLockValue(v)
		assert.Error(t, err, "ParseLockValue(%q)", v)
	}
}

func TestParseTryReply(t *testing.T) {
	ok := []struct {
		reply any
		want  protocol.TryResult
	}{
		{[]any{int64(1), int64(42)}, protocol.TryResult{Outcome: protocol.Acquired, Seq: 42}},
		{[]any{int64(1), int64(0)}, protocol.TryResult{Outcome: protocol.Acquired}}, // unfenced
		{[]any{int64(1), int64(maxSeq)}, protocol.TryResult{Outcome: protocol.Acquired, Seq: maxSeq}},
		{[]any{int64(2), int64(42)}, protocol.TryResult{Outcome: protocol.Reacquired, Seq: 42}},
		{[]any{int64(0), int64(1500)}, protocol.TryResult{Outcome: protocol.Held, PTTL: 1500 * time.Millisecond}},
		{[]any{int64(0), int64(-1)}, protocol.TryResult{Outcome: protocol.Held, PTTL: -time.Millisecond}}, // no ttl
		{[]any{int64(3), int64(0)}, protocol.TryResult{Outcome: protocol.Reserved}},
	}
	for _, c := range ok {
		got, err := protocol.ParseTryReply(c.reply)
		require.NoError(t, err, "%v", c.reply)
		assert.Equal(t, c.want, got, "%v", c.reply)
		assert.Equal(t, c.want.Outcome == protocol.Acquired || c.want.Outcome == protocol.Reacquired, got.Got())
	}
	bad := []any{
		nil, "1", int64(1), []any{}, []any{int64(1)}, []any{int64(1), int64(2), int64(3)}, // wrong shape
		[]any{"1", int64(2)}, []any{int64(1), "2"}, []any{int64(1), nil}, []any{nil, int64(1)},
		[]any{int64(1), 2.5}, []string{"1", "2"}, // wrong types
		[]any{int64(4), int64(0)}, []any{int64(-1), int64(0)}, []any{int64(99), int64(1)}, // unknown code
		[]any{int64(1), int64(-1)}, []any{int64(2), int64(-5)}, // negative seq
	}
	for _, r := range bad {
		_, err := protocol.ParseTryReply(r)
		assert.Error(t, err, "ParseTryReply(%#v)", r)
	}
}

// An outcome code that wraps around int8 is no known code either.
func TestParseTryReplyCodeOutOfInt8(t *testing.T) {
	for _, code := range []int64{256, 257, 258, 259, -256, 1 << 40} {
		r, err := protocol.ParseTryReply([]any{code, int64(5)})
		assert.Error(t, err, "code %d parsed as %+v", code, r)
	}
}

// hashTag is the part of key that Redis Cluster hashes: the content of the
// first {...} when it is non-empty, else the whole key.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestKeysFor(t *testing.T) {
	k := protocol.KeysFor("app:", "orders/42")
	assert.Equal(t, []string{
		"app:{orders/42}",
		"app:{orders/42}:fence",
		"app:{orders/42}:queue",
		"app:{orders/42}:tickets",
		"app:{orders/42}:release",
		"app:{orders/42}:ahead",
		"app:{orders/42}:waiting",
	}, []string{k.Lock, k.Counter, k.Queue, k.Tickets, k.Channel, k.Ahead, k.Waiting})
	for _, c := range []struct{ prefix, name string }{
		{"fencelock:", "x"}, {"", "x"}, {"a:b:", "with:colons"}, {"p", "ünïcode name"},
	} {
		k := protocol.KeysFor(c.prefix, c.name)
		all := []string{k.Lock, k.Counter, k.Queue, k.Tickets, k.Channel, k.Ahead, k.Waiting}
		seen := map[string]bool{}
		for _, key := range all {
			assert.Equal(t, c.name, hashTag(key), "%q: one slot for all keys", key)
			assert.True(t, strings.HasPrefix(key, c.prefix), key)
			assert.False(t, seen[key], "duplicate key %q", key)
			seen[key] = true
		}
	}
	// Different names never share keys, even when one is a prefix of another.
	a, b := protocol.KeysFor("p:", "x"), protocol.KeysFor("p:", "x:fence")
	assert.NotEqual(t, a.Counter, b.Lock)
}

func TestPubSubFor(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer c.Close()
	defer cc.Close()
	defer ring.Close()
	defer failover.Close()
	assert.Equal(t, protocol.PubSubClassic, protocol.PubSubFor(c))
	assert.Equal(t, protocol.PubSubUnknown, protocol.PubSubFor(cc))
	assert.Equal(t, protocol.PubSubNone, protocol.PubSubFor(ring))
	assert.Equal(t, protocol.PubSubClassic, protocol.PubSubFor(failover)) // a *redis.Client
	assert.Equal(t, protocol.PubSubClassic, protocol.PubSubFor(rdb))
}

func TestDetectPubSub(t *testing.T) {
	got, err := protocol.DetectPubSub(t.Context(), rdb)
	require.NoError(t, err)
	info, err := rdb.Info(t.Context(), "server").Result()
	require.NoError(t, err)
	var major int
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			_, err := fmt.Sscanf(v, "%d", &major)
			require.NoError(t, err)
		}
	}
	want := protocol.PubSubClassic
	if major >= 7 {
		want = protocol.PubSubSharded
	}
	assert.Equal(t, want, got, "redis %d", major)
}

func TestMayHaveRun(t *testing.T) {
	// A real error reply.
	replyErr := rdb.Do(t.Context(), "NOSUCHCOMMAND").Err()
	require.Error(t, replyErr)
	// A real refused dial.
	closed := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer closed.Close()
	dialErr := closed.Ping(t.Context()).Err()
	require.Error(t, dialErr)

	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{replyErr, false},
		{fmt.Errorf("wrapped: %w", replyErr), false},
		{dialErr, false},
		{&net.OpError{Op: "dial", Err: errors.New("no route")}, false},
		{&net.OpError{Op: "read", Err: errors.New("reset")}, true},
		{&net.OpError{Op: "write", Err: errors.New("broken pipe")}, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, true},
		{io.EOF, true},
		{errors.New("anything"), true},
	} {
		assert.Equal(t, c.want, protocol.MayHaveRun(c.err), "%v", c.err)
	}
}
