package lease_test

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

// shared is the Redis that TestMain starts (or REDIS_URL) for the tests and
// examples that do not stop or pause their server.
var shared redis.UniversalClient

func TestMain(m *testing.M) {
	if code, ok := processChild(); ok { // a child process of process_test.go
		os.Exit(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rdb, stop, err := testenv.RedisOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease tests:", err)
		os.Exit(1)
	}
	shared = rdb
	if os.Getenv("REDIS_URL") == "" { // the examples read it, as a program would
		os.Setenv("REDIS_URL", "redis://"+rdb.(*redis.Client).Options().Addr)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	stopTLS, err := startTLSExample(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease tests:", err)
		stop()
		os.Exit(1)
	}
	// ExampleSemaphore writes to PostgreSQL: DATABASE_URL, or one started here.
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	dsn, stopPG, err := testenv.PostgresOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease tests:", err)
		stopTLS()
		stop()
		os.Exit(1)
	}
	os.Setenv("DATABASE_URL", dsn)
	code := m.Run()
	stopPG()
	stopTLS()
	stop()
	os.Exit(code)
}

// newClient returns a lease client on the shared Redis.
func newClient(t testing.TB, opts ...lease.Option) *lease.Client {
	t.Helper()
	c, err := lease.New(shared, opts...)
	require.NoError(t, err)
	return c
}

// countingClient returns a lease client on the shared Redis whose counters
// never expire: on a lock given a counter at 0 (see counting), its tokens
// count 1, 2, 3..., for the tests of the counter's arithmetic.
func countingClient(t testing.TB, opts ...lease.Option) *lease.Client {
	t.Helper()
	return newClient(t, append([]lease.Option{lease.WithCounterTTL(0)}, opts...)...)
}

// name returns a lock name unique to this test run.
func name(t testing.TB) string {
	return t.Name() + "/" + uuid.NewString()[:8]
}

// ownRedis starts a Redis only this test uses, for tests that stop, pause or
// flush it, with a client that fails fast instead of retrying.
func ownRedis(t *testing.T) (*testenv.Redis, *redis.Client) {
	t.Helper()
	r := testenv.NewRedis(t)
	opt := r.Options()
	opt.DialTimeout = 200 * time.Millisecond
	opt.ReadTimeout = 500 * time.Millisecond
	opt.WriteTimeout = 500 * time.Millisecond
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return r, c
}
