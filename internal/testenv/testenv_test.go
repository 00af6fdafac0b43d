package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedisKillForgetsKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := NewRedis(t)
	addr := r.Addr()
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

	require.NoError(t, r.Kill())
	assert.Error(t, ping(ctx, addr, nil), "server is down")
	require.NoError(t, r.Start(ctx))
	assert.Equal(t, addr, r.Addr(), "same port after restart")
	assert.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "no persistence: key is gone")

	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, r.Stop())
	require.NoError(t, r.Start(ctx))
	assert.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "no persistence: gone after Stop too")
	assert.Error(t, r.Start(ctx), "already running")
}

func TestRedisAppendOnlySurvivesStop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := NewRedis(t, RedisOptions{Args: []string{"--appendonly", "yes"}})
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, r.Stop())
	require.NoError(t, r.Start(ctx))
	v, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", v)
}

func TestRedisPauseBlocksUntilResume(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := NewRedis(t)
	opt := r.Options()
	opt.ReadTimeout, opt.MaxRetries = 200*time.Millisecond, -1
	short := redis.NewClient(opt)
	defer short.Close()
	require.NoError(t, short.Ping(ctx).Err())
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.Ping(ctx).Err())

	require.NoError(t, r.Pause())
	err := short.Set(ctx, "k", "short", 0).Err()
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout(), "want a timeout, got %v", err)

	done := make(chan error, 1)
	go func() { done <- c.Set(ctx, "k", "v", 0).Err() }()
	select {
	case err := <-done:
		t.Fatalf("SET finished while paused: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, r.Resume())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("SET still blocked after Resume")
	}
	assert.NoError(t, short.Ping(ctx).Err())
}

func TestRedisStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	_, err := StartRedis(t.Context(), RedisOptions{Args: []string{"--no-such-directive", "1"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-such-directive", "log tail in the error")
}

func TestRedisMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartRedis(t.Context(), RedisOptions{})
	require.ErrorIs(t, err, ErrNotInstalled)
	assert.Contains(t, err.Error(), "scripts/deps.sh")
}

func TestRedisN(t *testing.T) {
	t.Parallel()
	rs := NewRedisN(t, 3)
	seen := map[string]bool{}
	for _, r := range rs {
		seen[r.Addr()] = true
		c := r.Client()
		assert.NoError(t, c.Ping(t.Context()).Err())
		c.Close()
	}
	assert.Len(t, seen, 3)
}

func TestRedisCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	r, err := StartRedis(t.Context(), RedisOptions{})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	assert.ErrorIs(t, r.Start(t.Context()), ErrClosed)
	_, err = os.Stat(r.Dir())
	assert.True(t, os.IsNotExist(err), "dir removed")
}

func TestReplication(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary, replica := NewReplicated(t)
	pc, rc := primary.Client(), replica.Client()
	defer pc.Close()
	defer rc.Close()

	require.NoError(t, pc.Set(ctx, "k", "v", 0).Err())
	require.Eventually(t, func() bool { return rc.Get(ctx, "k").Val() == "v" }, 5*time.Second, 10*time.Millisecond)
	err := rc.Set(ctx, "k", "w", 0).Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "READONLY")

	require.NoError(t, replica.Promote(ctx))
	require.NoError(t, rc.Set(ctx, "k", "w", 0).Err())

	// The old primary follows the new one.
	require.NoError(t, primary.ReplicaOf(ctx, replica))
	require.Eventually(t, func() bool { return pc.Get(ctx, "k").Val() == "w" }, 5*time.Second, 10*time.Millisecond)
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cl := NewCluster(t, 3)
	require.Len(t, cl.Addrs(), 3)
	cc := cl.Client()
	defer cc.Close()
	for i := range 300 {
		require.NoError(t, cc.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err())
	}
	for i := range 300 {
		v, err := cc.Get(ctx, fmt.Sprintf("key-%d", i)).Int()
		require.NoError(t, err)
		require.Equal(t, i, v)
	}
	for _, n := range cl.Nodes() {
		c := n.Client()
		info, err := c.ClusterInfo(ctx).Result()
		require.NoError(t, err)
		assert.Contains(t, info, "cluster_state:ok")
		assert.Contains(t, info, "cluster_known_nodes:3")
		assert.Positive(t, c.DBSize(ctx).Val(), "keys spread over %s", n.Addr())
		c.Close()
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := NewPostgres(t)
	assert.True(t, strings.HasPrefix(p.DSN(), "postgres://postgres@127.0.0.1:"), p.DSN())
	query := func(sql string, args ...any) (n int) {
		t.Helper()
		conn, err := pgx.Connect(ctx, p.DSN())
		require.NoError(t, err)
		defer conn.Close(ctx)
		if strings.HasPrefix(sql, "SELECT") {
			require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n))
			return n
		}
		_, err = conn.Exec(ctx, sql, args...)
		require.NoError(t, err)
		return 0
	}
	query("CREATE TABLE t (id int primary key)")
	query("INSERT INTO t VALUES (1), (2)")

	require.NoError(t, p.Stop())
	require.NoError(t, p.Start(ctx))
	assert.Equal(t, 2, query("SELECT count(*) FROM t"), "data kept across Stop/Start")

	require.NoError(t, p.Kill())
	_, err := pgx.Connect(ctx, p.DSN())
	require.Error(t, err, "server is down")
	require.NoError(t, p.Start(ctx))
	assert.Equal(t, 2, query("SELECT count(*) FROM t"), "data kept across Kill/Start")
	query("INSERT INTO t VALUES (3)")
	assert.Equal(t, 3, query("SELECT count(*) FROM t"))

	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = os.Stat(p.Dir())
	assert.True(t, os.IsNotExist(err), "dir removed")
}

func TestEnvOverrides(t *testing.T) {
	ctx := t.Context()
	t.Setenv("REDIS_URL", "")
	c, closeFn, err := RedisOrStart(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Ping(ctx).Err())
	closeFn()

	r := NewRedis(t)
	t.Setenv("REDIS_URL", r.URL())
	c, closeFn, err = RedisOrStart(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, "via-url", 1, 0).Err())
	closeFn()
	rc := r.Client()
	defer rc.Close()
	assert.Equal(t, "1", rc.Get(ctx, "via-url").Val(), "REDIS_URL was used")

	t.Setenv("REDIS_URL", "redis://127.0.0.1:1/0")
	_, _, err = RedisOrStart(ctx)
	assert.Error(t, err, "unreachable REDIS_URL is reported")

	t.Setenv("DATABASE_URL", "postgres://example/db")
	dsn, closeDB, err := PostgresOrStart(ctx)
	require.NoError(t, err)
	assert.Equal(t, "postgres://example/db", dsn)
	closeDB()
}

func TestStartHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := StartRedis(ctx, RedisOptions{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
}

// serverInfo returns the INFO server section of the server r runs.
func serverInfo(t *testing.T, r *Redis) string {
	t.Helper()
	c := r.Client()
	defer c.Close()
	info, err := c.Info(t.Context(), "server").Result()
	require.NoError(t, err)
	return info
}

func TestServerEnvStartsValkey(t *testing.T) {
	t.Setenv(ServerEnv, "valkey-server")
	r := NewRedis(t)
	assert.Contains(t, serverInfo(t, r), "valkey_version:", "a Valkey answers")
	require.NoError(t, r.Kill())
	require.NoError(t, r.Start(t.Context()))
	assert.Contains(t, serverInfo(t, r), "valkey_version:", "a Valkey again after a restart")

	require.NoError(t, r.Pause())
	require.NoError(t, r.Resume())
	assert.Contains(t, serverInfo(t, r), "valkey_version:")
}

func TestServerEnvDefaultIsRedis(t *testing.T) {
	t.Setenv(ServerEnv, "")
	r := NewRedis(t)
	assert.NotContains(t, serverInfo(t, r), "valkey_version:")
}

func TestServerEnvMissingBinary(t *testing.T) {
	t.Setenv(ServerEnv, "")
	primary := NewRedis(t)
	t.Setenv(ServerEnv, "no-such-server")
	_, err := StartRedis(t.Context(), RedisOptions{})
	require.ErrorIs(t, err, ErrNotInstalled)
	assert.Contains(t, err.Error(), "no-such-server")
	assert.Contains(t, err.Error(), ServerEnv)
	_, err = StartSentinel(t.Context(), primary, "m")
	require.ErrorIs(t, err, ErrNotInstalled, "sentinels use the same binary")
}

func TestServerOptionOverridesEnv(t *testing.T) {
	t.Setenv(ServerEnv, "") // redis-server, unless the option says otherwise
	r, err := StartRedis(t.Context(), RedisOptions{Server: "valkey-server"})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	assert.Contains(t, serverInfo(t, r), "valkey_version:", "the option picks Valkey")
	require.NoError(t, r.Kill())
	require.NoError(t, r.Start(t.Context()))
	assert.Contains(t, serverInfo(t, r), "valkey_version:", "and keeps it across a restart")

	_, err = StartRedis(t.Context(), RedisOptions{Server: "no-such-server"})
	require.ErrorIs(t, err, ErrNotInstalled)
	assert.Contains(t, err.Error(), "no-such-server")
	assert.NotContains(t, err.Error(), ServerEnv, "the option, not the variable, named it")
}
