package heal_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
)

// shared is the Redis that TestMain starts (or REDIS_URL), for the examples.
// Tests that restart or fill their server start their own.
var shared redis.UniversalClient

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rdb, stop, err := testenv.RedisOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "heal tests:", err)
		os.Exit(1)
	}
	shared = rdb
	code := m.Run()
	stop()
	os.Exit(code)
}
