package redsyncbridge_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/extra/fencebridge"
	"github.com/fencelock/fencelock/extra/fencebridge/redsyncbridge"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

func setup(t *testing.T) (*redis.Client, *lease.Client) {
	t.Helper()
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	locks, err := lease.New(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { locks.Close(context.Background()) })
	return rdb, locks
}

func TestNilRedsync(t *testing.T) {
	_, locks := setup(t)
	b, err := fencebridge.New(redsyncbridge.New(nil), locks)
	require.NoError(t, err)
	_, err = b.Acquire(t.Context(), "x", time.Second)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid, "a nil *redsync.Redsync fails at the acquire")
}

// TestReleaseFreesBoth: the bridge holds redsync's key and fencelock's,
// until redsync's deadline (8s by default), and its release frees both.
func TestReleaseFreesBoth(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	b, err := fencebridge.New(redsyncbridge.New(redsync.New(goredis.NewPool(rdb))), locks)
	require.NoError(t, err)
	l, err := b.Acquire(ctx, "reports/nightly", time.Minute)
	require.NoError(t, err)
	old, err := rdb.Get(ctx, "reports/nightly").Result()
	require.NoError(t, err, "the old key is held")
	assert.NotEmpty(t, old)
	assert.WithinDuration(t, time.Now().Add(8*time.Second), l.Deadline(), time.Second)
	require.NoError(t, l.Release(ctx))
	_, err = rdb.Get(ctx, "reports/nightly").Result()
	assert.ErrorIs(t, err, redis.Nil, "the old key is gone")
	info, err := locks.Inspect(ctx, "reports/nightly")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lock is free")
}

// TestOldHolderExcludesBridge: while an old process (redsync) holds the
// name, the bridge takes neither lock.
func TestOldHolderExcludesBridge(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	rs := redsync.New(goredis.NewPool(rdb))
	m := rs.NewMutex("jobs/a", redsync.WithExpiry(time.Minute))
	require.NoError(t, m.LockContext(ctx))

	b, err := fencebridge.New(redsyncbridge.New(rs, redsync.WithTries(2)), locks)
	require.NoError(t, err)
	_, err = b.Acquire(ctx, "jobs/a", time.Minute)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	var taken *redsync.ErrTaken
	assert.ErrorAs(t, err, &taken, "redsync's own error stays reachable")
	assert.NotContains(t, err.Error(), "\n", "one line")
	info, err := locks.Inspect(ctx, "jobs/a")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lock was not taken")
}

// TestKeepAlive: redsync's lock of 300ms is extended with fencelock's
// lease, and a redsync process cannot take it meanwhile.
func TestKeepAlive(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	rs := redsync.New(goredis.NewPool(rdb))
	b, err := fencebridge.New(redsyncbridge.New(rs, redsync.WithExpiry(300*time.Millisecond)), locks)
	require.NoError(t, err)
	l, err := b.Acquire(ctx, "jobs/k", 300*time.Millisecond, fencebridge.WithKeepAlive(0))
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, l.Err())
	assert.True(t, l.Held())
	err = rs.NewMutex("jobs/k", redsync.WithTries(1)).LockContext(ctx)
	assert.Error(t, err, "an old process finds the lock held")
	require.NoError(t, l.Release(ctx))
	assert.NoError(t, rs.NewMutex("jobs/k", redsync.WithTries(1)).LockContext(ctx), "and free after release")
}

// TestErrorsOnOneLine: redsync joins its nodes' errors one per line; the
// bridge's error reads as one line, and the node errors stay reachable.
func TestErrorsOnOneLine(t *testing.T) {
	rdb, locks := setup(t)
	down1 := testenv.CtxClient(t, testenv.ClosedAddr(t), 1)
	down2 := testenv.CtxClient(t, testenv.ClosedAddr(t), 1)
	rs := redsync.New(goredis.NewPool(rdb), goredis.NewPool(down1), goredis.NewPool(down2))
	b, err := fencebridge.New(redsyncbridge.New(rs, redsync.WithTries(1)), locks)
	require.NoError(t, err)
	_, err = b.Acquire(t.Context(), "jobs/e", time.Second)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	var node *redsync.RedisError
	require.ErrorAs(t, err, &node, "the node errors stay reachable: %v", err)
	assert.NotContains(t, err.Error(), "\n")
	assert.Contains(t, err.Error(), "; ", "both nodes' errors are in the message: %v", err)
}

// TestModuleGraphHasNoRedislock: a module of a redsync user that imports
// this bridge gets no bsm/redislock, not even in its module graph. It runs
// the go command offline, on the module cache this test's build filled.
func TestModuleGraphHasNoRedislock(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	_, here, _, _ := runtime.Caller(0)
	bridge := filepath.Dir(filepath.Dir(here)) // extra/fencebridge
	root := filepath.Dir(filepath.Dir(bridge))
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("go.mod", `module example.com/user

go 1.26.0

require github.com/fencelock/fencelock/extra/fencebridge/redsyncbridge v0.1.0

replace (
	github.com/fencelock/fencelock => `+root+`
	github.com/fencelock/fencelock/extra/fencebridge => `+bridge+`
	github.com/fencelock/fencelock/extra/fencebridge/redsyncbridge => `+filepath.Join(bridge, "redsyncbridge")+`
)
`)
	write("main.go", `package main

import (
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/extra/fencebridge"
	"github.com/fencelock/fencelock/extra/fencebridge/redsyncbridge"
	"github.com/fencelock/fencelock/lease"
)

func main() {
	rdb := redis.NewClient(&redis.Options{})
	locks, _ := lease.New(rdb)
	_, _ = fencebridge.New(redsyncbridge.New(redsync.New(goredis.NewPool(rdb))), locks)
}
`)
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	run := func(args ...string) string {
		cmd := exec.Command(gocmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	// No `go mod tidy`: it would also resolve the imports of the tests of
	// redsync and go-redis (old go-redis majors, redigo, ...), which a module
	// cache filled by this build does not hold. The build adds what main.go
	// needs, from the graph alone.
	run("build", "./...")
	all := run("list", "-m", "all")
	assert.Contains(t, all, "github.com/go-redsync/redsync/v4")
	assert.NotContains(t, all, "bsm/redislock", "the module graph:\n%s", all)
	t.Logf("go list -m all: %d modules", strings.Count(all, "\n"))
}
