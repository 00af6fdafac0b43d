package peertest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// TestPeerHolderValues: the holder values redsync and redislock generate
// are accepted by lease.WithHolder, and the token carrying one survives
// its text form and the HTTP header.
func TestPeerHolderValues(t *testing.T) {
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	locks, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	var values []string
	rs := redsync.New(goredis.NewPool(rdb))
	rl := redislock.New(rdb)
	for range 20 {
		m := rs.NewMutex("peer/redsync")
		require.NoError(t, m.LockContext(ctx))
		values = append(values, m.Value())
		_, err := m.UnlockContext(ctx)
		require.NoError(t, err)
		l, err := rl.Obtain(ctx, "peer/redislock", time.Minute, nil)
		require.NoError(t, err)
		values = append(values, l.Token())
		require.NoError(t, l.Release(ctx))
	}
	sawBase64Std := false
	for _, v := range values {
		sawBase64Std = sawBase64Std || strings.ContainsAny(v, "+/=")
		l, err := locks.TryAcquire(ctx, "peer/fencelock", time.Minute, lease.WithHolder(v))
		require.NoError(t, err, "holder %q", v)
		assert.Equal(t, v, l.Token().Holder)
		back, err := fence.Parse(l.Token().String())
		require.NoError(t, err)
		assert.Equal(t, l.Token(), back)
		info, err := locks.Inspect(ctx, "peer/fencelock")
		require.NoError(t, err)
		assert.Equal(t, v, info.Holder)
		require.NoError(t, l.Release(ctx))
	}
	assert.True(t, sawBase64Std, "redsync's values have '=' padding: %q", values[0])

	_, err = locks.TryAcquire(ctx, "peer/fencelock", time.Minute, lease.WithHolder("a:b"))
	require.ErrorIs(t, err, lease.ErrInvalid)
	assert.True(t, errors.Is(err, fence.ErrMalformed))
	assert.Contains(t, err.Error(), "':' and ',' separate", "the refusal says why")
}
