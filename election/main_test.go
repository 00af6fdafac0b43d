package election_test

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
	if code, ok := child(); ok { // a candidate process of process_test.go
		os.Exit(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rdb, stop, err := testenv.RedisOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "election tests:", err)
		os.Exit(1)
	}
	shared = rdb
	code := m.Run()
	stop()
	os.Exit(code)
}

// suffix makes names unique to this run.
func suffix() string { return uuid.NewString()[:8] }

// newClient returns a lease client on the shared Redis.
func newClient(t testing.TB) *lease.Client {
	t.Helper()
	c, err := lease.New(shared)
	require.NoError(t, err)
	return c
}
