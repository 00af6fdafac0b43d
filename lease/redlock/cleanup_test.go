package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// TestBurstLeavesNoMinorityLocks: a burst of Redlock acquires with mixed
// deadlines (200µs to 100ms) and random cancels, on healthy
// nodes, with the default node timeout. However each attempt ended (won,
// lost, its replies late or never sent), once Close returned no node holds
// a lock for a holder that never got a lease: every attempt that failed
// was released on every node whose call may have run. Before the one
// transport rule, one to three nodes still held such locks 4s later, in
// every run.
func TestBurstLeavesNoMinorityLocks(t *testing.T) {
	t.Parallel()
	_, rdbs := ownNodes(t, 3)
	for _, closeDuring := range []bool{false, true} {
		t.Run(fmt.Sprintf("close during the burst=%v", closeDuring), func(t *testing.T) {
			c, err := redlock.New(rdbs, redlock.WithQuorumFencing(true), lease.WithPrefix(fmt.Sprintf("burst%v:", closeDuring)))
			require.NoError(t, err)
			const names, workers = 20, 300
			base := name(t)
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for i := range workers {
				wg.Go(func() {
					d := time.Duration(200+rand.IntN(100_000)) * time.Microsecond
					ctx, cancel := context.WithTimeout(context.Background(), d)
					defer cancel()
					if rand.IntN(4) == 0 {
						go func() { time.Sleep(d / 3); cancel() }()
					}
					l, err := c.TryAcquire(ctx, fmt.Sprintf("%s/%d", base, i%names), 10*time.Second)
					if err != nil {
						return
					}
					mu.Lock()
					won++
					mu.Unlock()
					_ = l.Release(context.Background())
				})
			}
			if closeDuring {
				time.Sleep(5 * time.Millisecond)
				// Close during the burst: it waits for the cleanups started so
				// far; the acquires still running fail with ErrInvalid or finish.
				cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				require.NoError(t, c.Close(cctx))
				cancel()
			}
			wg.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, c.Close(ctx), "the cleanups end well before the ttl on healthy nodes")
			t.Logf("%d of %d attempts won", won, workers)
			for i := range names {
				k := protocol.KeysFor(fmt.Sprintf("burst%v:", closeDuring), fmt.Sprintf("%s/%d", base, i))
				for n, rdb := range rdbs {
					st, err := protocol.Inspect(context.Background(), rdb, k)
					require.NoError(t, err)
					assert.Empty(t, st.Holder, "node #%d holds %s for a holder that has no lease (ttl %v)", n, k.Lock, st.PTTL)
				}
			}
		})
	}
}
