package once_test

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
	"github.com/fencelock/fencelock/once"
)

// shared is the Redis that TestMain starts (or REDIS_URL).
var shared redis.UniversalClient

func TestMain(m *testing.M) {
	if code, ok := hostChild(); ok { // a host process of process_test.go
		os.Exit(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rdb, stop, err := testenv.RedisOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "once tests:", err)
		os.Exit(1)
	}
	shared = rdb
	code := m.Run()
	stop()
	os.Exit(code)
}

func exampleRedis() redis.UniversalClient { return shared }
func exampleSuffix() string               { return uuid.NewString()[:8] }

// name returns a job name unique to this test run.
func name(t testing.TB) string { return t.Name() + "/" + uuid.NewString()[:8] }

func newLocks(t testing.TB) *lease.Client {
	t.Helper()
	c, err := lease.New(shared)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func newTracker(t testing.TB, opts ...once.Option) *once.Tracker {
	t.Helper()
	tr, err := once.New(shared, opts...)
	require.NoError(t, err)
	return tr
}
