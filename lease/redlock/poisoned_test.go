package redlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// TestWriteBackRefusesAPoisonedCounter: one node's counter was set near
// 2^53 (a forged or mistyped value). Quorum fencing's write-back refuses
// to carry it to the other nodes (lease.ErrPoisoned), so once that node's
// counter is repaired (deleted: it then starts at the clock) the lock is
// usable again. Before, the write-back lifted a majority there and retired
// the lock.
func TestWriteBackRefusesAPoisonedCounter(t *testing.T) {
	_, rdbs := ownNodes(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	c := newLocker(t, rdbs, redlock.WithQuorumFencing(true))
	n := name(t)
	k := protocol.KeysFor(lease.DefaultPrefix, n)
	require.NoError(t, rdbs[2].Set(ctx, k.Counter, uint64(fence.MaxSeq-1), 0).Err())

	_, err := c.TryAcquire(ctx, n, 10*time.Second)
	require.ErrorIs(t, err, lease.ErrPoisoned)
	for i := range 2 {
		v, err := rdbs[i].Get(ctx, k.Counter).Uint64()
		require.NoError(t, err)
		assert.False(t, protocol.TooFarAhead(v, time.Now()), "node %d's counter %d was not lifted", i, v)
	}

	require.NoError(t, rdbs[2].Del(ctx, k.Counter).Err()) // the repair
	for range 3 {
		l, err := c.TryAcquire(ctx, n, 10*time.Second)
		require.NoError(t, err, "the lock is usable again")
		require.NoError(t, l.Release(ctx))
	}
}
