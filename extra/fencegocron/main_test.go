package fencegocron

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
)

// shared is the Redis that TestMain starts (or REDIS_URL), for the tests in
// this process; the scheduler processes get their own (see process_test.go).
var shared redis.UniversalClient

func TestMain(m *testing.M) {
	if code, ok := child(); ok { // a scheduler process of process_test.go
		os.Exit(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rdb, stop, err := testenv.RedisOrStart(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencegocron tests:", err)
		os.Exit(1)
	}
	shared = rdb
	if os.Getenv("REDIS_URL") == "" { // the examples read it, as a program would
		os.Setenv("REDIS_URL", "redis://"+rdb.(*redis.Client).Options().Addr)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}
