package protocol_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
)

// TestPoisonedFloorRefused: Advance, Reissue and Adopt refuse to lift a
// counter more than MaxAhead above the server's clock, leave the counter
// and the lock as they were, and the lock goes on issuing tokens.
func TestPoisonedFloorRefused(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "a", 10*time.Second)
	poisoned := uint64(maxSeq - 1)
	wantRefused := func(err error, what string) {
		t.Helper()
		require.Error(t, err, what)
		assert.ErrorIs(t, err, protocol.ErrPoisoned, what)
		var rerr redis.Error
		assert.True(t, errors.As(err, &rerr), "%s: the script's reply is kept", what)
		assert.False(t, protocol.MayHaveRun(err), "%s: an error reply changed nothing", what)
		assert.Contains(t, err.Error(), fmt.Sprint(poisoned), what)
		assert.Equal(t, seq, counterValue(t, k), "%s: the counter is untouched", what)
		assert.Equal(t, protocol.LockValue("a", seq), lockValue(t, k), "%s: the lock is untouched", what)
	}
	_, err := protocol.Advance(ctx, rdb, k, poisoned, counter)
	wantRefused(err, "advance")
	_, err = protocol.Reissue(ctx, rdb, k, "a", poisoned, counter)
	wantRefused(err, "reissue")
	_, err = protocol.Reissue(ctx, rdb, k, "b", poisoned, counter)
	wantRefused(err, "reissue, not the holder")
	_, err = protocol.Adopt(ctx, rdb, k, "a", poisoned, counter)
	wantRefused(err, "adopt")

	// Just below the bound is a floor like any other; just above is not.
	now := time.UnixMicro(int64(clockUS(t)))
	near := uint64(now.Add(protocol.MaxAhead - time.Minute).UnixMicro())
	far := uint64(now.Add(protocol.MaxAhead + time.Minute).UnixMicro())
	assert.False(t, protocol.TooFarAhead(near, now))
	assert.True(t, protocol.TooFarAhead(far, now))
	_, err = protocol.Advance(ctx, rdb, k, far, counter)
	assert.ErrorIs(t, err, protocol.ErrPoisoned, "a minute past the bound")
	n, err := protocol.Advance(ctx, rdb, k, near, counter)
	require.NoError(t, err, "a minute within the bound")
	assert.Equal(t, near, n)

	// The lock goes on: released and taken again, with the next token.
	ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, near+1, take(t, k, "b", time.Second))

	// A floor below an already poisoned counter lifts nothing: not refused.
	k2 := keysFor(t)
	require.NoError(t, rdb.Set(ctx, k2.Counter, poisoned, 0).Err())
	n, err = protocol.Advance(ctx, rdb, k2, 5, counter)
	require.NoError(t, err)
	assert.Equal(t, poisoned, n)
}

// TestMaxAheadInStep: the Go bound is the scripts' own.
func TestMaxAheadInStep(t *testing.T) {
	b, err := os.ReadFile("common.lua")
	require.NoError(t, err)
	assert.Contains(t, string(b), fmt.Sprintf("local MAX_AHEAD = %d\n", protocol.MaxAhead/time.Microsecond))
}
