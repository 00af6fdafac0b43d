package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// TestAdvanceRefusesAPoisonedFloor: `advance` to 2^53-2, one mistyped
// digit from a sensible floor, would retire the lock; it is refused with
// ErrPoisoned and the lock goes on issuing tokens.
func TestAdvanceRefusesAPoisonedFloor(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	n := name(t)
	l, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	seq := l.Token().Seq
	_, err = c.Advance(ctx, n, fence.MaxSeq-1)
	require.ErrorIs(t, err, lease.ErrPoisoned)
	assert.Contains(t, err.Error(), "more than 24h above the server clock")
	_, err = l.Reissue(ctx, fence.MaxSeq-1)
	require.ErrorIs(t, err, lease.ErrPoisoned, "reissue")
	assert.Equal(t, seq, l.Token().Seq, "the token is kept")
	require.NoError(t, l.Release(ctx))
	for range 3 {
		l, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err, "the lock is still usable")
		assert.Greater(t, l.Token().Seq, seq)
		seq = l.Token().Seq
		require.NoError(t, l.Release(ctx))
	}
}
