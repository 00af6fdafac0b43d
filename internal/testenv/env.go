package testenv

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
)

// RedisURL returns $REDIS_URL: the Redis that examples, bench and
// RedisOrStart use instead of a throwaway server when it is set.
func RedisURL() string { return os.Getenv("REDIS_URL") }

// DatabaseURL returns $DATABASE_URL: the PostgreSQL that examples, bench and
// PostgresOrStart use instead of a throwaway server when it is set.
func DatabaseURL() string { return os.Getenv("DATABASE_URL") }

// RedisOrStart returns a client for REDIS_URL when it is set (checked with a
// PING), else for a throwaway Redis it starts. The returned close func closes
// the client and stops what was started; it is never nil when err is nil.
func RedisOrStart(ctx context.Context) (redis.UniversalClient, func(), error) {
	if url := RedisURL(); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, fmt.Errorf("testenv: REDIS_URL: %w", err)
		}
		c := redis.NewClient(opt)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("testenv: REDIS_URL=%s: ping: %w", url, err)
		}
		return c, func() { c.Close() }, nil
	}
	r, err := StartRedis(ctx, RedisOptions{})
	if err != nil {
		return nil, nil, err
	}
	c := r.Client()
	return c, func() { c.Close(); r.Close() }, nil
}

// PostgresOrStart returns DATABASE_URL when it is set, else the DSN of a
// throwaway PostgreSQL it starts (database "fencelock"). The returned close
// func stops what was started (a no-op for DATABASE_URL); it is never nil
// when err is nil.
func PostgresOrStart(ctx context.Context) (dsn string, closeFn func(), err error) {
	if url := DatabaseURL(); url != "" {
		return url, func() {}, nil
	}
	p, err := StartPostgres(ctx)
	if err != nil {
		return "", nil, err
	}
	return p.DSN(), func() { p.Close() }, nil
}
