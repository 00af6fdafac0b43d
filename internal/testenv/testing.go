package testenv

import (
	"context"
	"testing"
	"time"
)

// startCtx bounds server startup in the testing helpers.
func startCtx(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), time.Minute)
}

// NewRedis starts a throwaway Redis (with opt[0] if given) that is closed when
// the test ends, and fails the test if it cannot start.
func NewRedis(t testing.TB, opt ...RedisOptions) *Redis {
	t.Helper()
	var o RedisOptions
	if len(opt) > 0 {
		o = opt[0]
	}
	ctx, cancel := startCtx(t)
	defer cancel()
	r, err := StartRedis(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// NewRedisN starts n independent throwaway Redis masters, closed when the
// test ends.
func NewRedisN(t testing.TB, n int) []*Redis {
	t.Helper()
	ctx, cancel := startCtx(t)
	defer cancel()
	rs, err := StartRedisN(ctx, n, RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(rs) })
	return rs
}

// NewReplicated starts a primary and a linked replica, closed when the test
// ends.
func NewReplicated(t testing.TB) (primary, replica *Redis) {
	t.Helper()
	ctx, cancel := startCtx(t)
	defer cancel()
	primary, replica, err := StartReplicated(ctx, RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll([]*Redis{primary, replica}) })
	return primary, replica
}

// NewCluster starts a Redis Cluster of masters nodes, closed when the test
// ends.
func NewCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	ctx, cancel := startCtx(t)
	defer cancel()
	c, err := StartCluster(ctx, masters)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// NewPostgres starts a throwaway PostgreSQL with the database "fencelock",
// closed when the test ends.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	ctx, cancel := startCtx(t)
	defer cancel()
	p, err := StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
