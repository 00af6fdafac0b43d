package lockset_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
	"github.com/fencelock/fencelock/lockset"
)

// TestRedlockSet: a set over a quorum of masters, with quorum fencing,
// behaves as over one Redis: all or nothing, tokens that a verifier
// checks, every lock free again after Release.
func TestRedlockSet(t *testing.T) {
	var nodes []*redis.Client
	for _, r := range testenv.NewRedisN(t, 3) {
		nodes = append(nodes, testenv.CtxClient(t, r.Addr(), 1))
	}
	c, err := redlock.New(nodes, redlock.WithQuorumFencing(true), redlock.WithNodeTimeout(time.Second))
	require.NoError(t, err)
	ctx := t.Context()
	ns := names(t, "a", "b")

	other, err := c.TryAcquire(ctx, ns[1], 10*time.Second)
	require.NoError(t, err)
	_, err = lockset.TryAcquire(ctx, c, []string{ns[1], ns[0]}, 10*time.Second)
	require.ErrorIs(t, err, lease.ErrNotAcquired, "b is held: nothing is taken")
	info, err := c.Inspect(ctx, ns[0])
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "a was not left taken")
	require.NoError(t, other.Release(ctx))

	set, err := lockset.Acquire(ctx, c, []string{ns[1], ns[0]}, 10*time.Second)
	require.NoError(t, err)
	for name, tok := range set.Tokens() {
		assert.Positive(t, tok.Seq, "%s: quorum fencing gives a real token", name)
	}
	require.NoError(t, set.Release(context.WithoutCancel(ctx)))
	for _, n := range ns {
		info, err := c.Inspect(ctx, n)
		require.NoError(t, err)
		assert.Empty(t, info.Holder, "%s is free after Release", n)
	}
}
