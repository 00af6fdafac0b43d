package heal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

// TestForgedHighWaterDoesNotRetireTheLock: a verifier accepted a forged
// token of Seq 2^53-2 (a verifier trusts its callers). heal.Write for a
// real holder then refuses to lift the counter there (ErrPoisoned), and
// the lock goes on issuing tokens.
func TestForgedHighWaterDoesNotRetireTheLock(t *testing.T) {
	ctx := t.Context()
	c, err := lease.New(shared)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	const name = "heal-poisoned/accounts/9"
	v := verifier.NewMemory()
	require.NoError(t, v.Claim(ctx, name, fence.Token{Key: name, Seq: fence.MaxSeq - 1, Holder: "mallory"}))

	l, err := c.TryAcquire(ctx, name, time.Minute)
	require.NoError(t, err)
	writes := 0
	write := func(ctx context.Context, tok fence.Token) error {
		return v.Do(ctx, name, tok, func() error { writes++; return nil })
	}
	err = heal.Write(ctx, l, write)
	require.ErrorIs(t, err, lease.ErrPoisoned, "the forged high-water is named")
	assert.ErrorIs(t, err, verifier.ErrStale, "the write's own error is kept")
	assert.Zero(t, writes)
	info, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Less(t, info.LastSeq, uint64(fence.MaxSeq-1), "the counter was not lifted")
	require.NoError(t, l.Release(ctx))

	for range 3 {
		l, err := c.TryAcquire(ctx, name, time.Minute)
		require.NoError(t, err, "the lock is still usable")
		require.NoError(t, l.Release(ctx))
	}
}
