package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
	"github.com/fencelock/fencelock/verifier"
)

// TestMutualExclusion has several goroutines, each with its own redlock
// client, take the same lock many times and checks that no two holding
// periods overlap and that tokens increase in the order the lock was held.
func TestMutualExclusion(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			const workers, rounds = 4, 25
			ctx := ctxFor(t, 30*time.Second)
			n := name(t)
			var (
				inside   atomic.Int32
				last     atomic.Uint64
				overlaps atomic.Int32
				wg       sync.WaitGroup
			)
			for w := range workers {
				c := newLocker(t, sharedRDB[:nodes], redlock.WithQuorumFencing(true),
					redlock.WithNodeTimeout(500*time.Millisecond))
				wg.Go(func() {
					for r := range rounds {
						l, err := c.Acquire(ctx, n, 5*time.Second)
						if !assert.NoError(t, err, "worker %d round %d", w, r) {
							return
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						seq := l.Token().Seq
						if prev := last.Swap(seq); seq <= prev {
							t.Errorf("worker %d: token %d after %d", w, seq, prev)
						}
						time.Sleep(time.Millisecond) // the critical section
						assert.NoError(t, l.Err(), "lease ended inside the critical section")
						inside.Add(-1)
						assert.NoError(t, l.Release(ctx))
					}
				})
			}
			wg.Wait()
			assert.Zero(t, overlaps.Load(), "overlapping holders")
			assert.GreaterOrEqual(t, last.Load(), uint64(workers*rounds))
		})
	}
}

// TestClockJumpBreaksRedlockVerifierSavesData plays Kleppmann's scenario on
// five nodes A..E. Client 1 gets A, B, C while D and E are unreachable. C's
// clock jumps forward, so C expires the key early (simulated: the key is
// deleted). D and E come back. Client 2 now gets C, D, E: a majority, while
// client 1 still holds A, B, C by its own clock. Both hold the lock at once;
// only the verifier at the storage keeps client 1's late write out.
func TestClockJumpBreaksRedlockVerifierSavesData(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 20*time.Second)
	opts := []redlock.Option{redlock.WithQuorumFencing(true), redlock.WithNodeTimeout(200 * time.Millisecond)}
	c1 := newLocker(t, rdbs, opts...)
	c2 := newLocker(t, rdbs, opts...)
	n := name(t)

	for _, r := range rs[3:] {
		require.NoError(t, r.Stop())
	}
	l1, err := c1.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err, "client 1 gets A, B, C")
	for _, r := range rs[3:] {
		require.NoError(t, r.Start(ctx))
	}

	// C's clock jumps: the key expires there long before client 1's ttl.
	require.NoError(t, rdbs[2].Del(ctx, protocol.KeysFor(lease.DefaultPrefix, n).Lock).Err())

	l2, err := c2.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err, "client 2 gets C, D, E")
	defer l2.Release(context.WithoutCancel(ctx))
	defer l1.Release(context.WithoutCancel(ctx))

	// Redlock's promise is broken: both hold it.
	assert.True(t, l1.Held(), "client 1 still holds the lock by its clock")
	assert.True(t, l2.Held(), "client 2 holds the lock")
	assert.NoError(t, l1.Err())
	assert.NoError(t, l2.Err())
	t.Logf("two holders at once: %v and %v", l1.Token(), l2.Token())
	require.True(t, l2.Token().Newer(l1.Token()), "client 2's token is newer: %v vs %v", l2.Token(), l1.Token())

	// The storage checks tokens: client 2 writes, then client 1's delayed
	// write arrives and is rejected.
	v := verifier.NewMemory()
	var data []string
	write := func(tok fence.Token, s string) error {
		return v.Do(ctx, "report", tok, func() error { data = append(data, s); return nil })
	}
	require.NoError(t, write(l2.Token(), "client 2"))
	err = write(l1.Token(), "client 1")
	assert.ErrorIs(t, err, verifier.ErrStale)
	assert.Equal(t, []string{"client 2"}, data)
}
