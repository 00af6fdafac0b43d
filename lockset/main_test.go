package lockset_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// shared is the Redis that TestMain starts (or REDIS_URL).
var shared redis.UniversalClient

func TestMain(m *testing.M) {
	if code, ok := callerChild(); ok { // a caller process of process_test.go
		os.Exit(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rdb, stop, err := testenv.RedisOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockset tests:", err)
		os.Exit(1)
	}
	shared = rdb
	code := m.Run()
	stop()
	os.Exit(code)
}

func exampleRedis() redis.UniversalClient { return shared }
func exampleSuffix() string               { return uuid.NewString()[:8] }

// names returns lock names unique to this test run: one prefix, then each
// suffix, so that they sort like the suffixes.
func names(t testing.TB, suffixes ...string) []string {
	prefix := t.Name() + "/" + uuid.NewString()[:8] + "/"
	out := make([]string, len(suffixes))
	for i, s := range suffixes {
		out[i] = prefix + s
	}
	return out
}

func newLocks(t testing.TB) *lease.Client {
	t.Helper()
	c, err := lease.New(shared)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// lockKey is lock name's key in Redis, as package lease documents it.
func lockKey(name string) string { return "fencelock:{" + name + "}" }

// held returns which of names have a lock key in rdb.
func held(t testing.TB, rdb redis.UniversalClient, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		k, err := rdb.Exists(context.Background(), lockKey(n)).Result()
		require.NoError(t, err)
		if k == 1 {
			out = append(out, n)
		}
	}
	return out
}
