package redlock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// restart kills the nodes rs[i] for i in idx (a crash: no persistence, so
// they come back empty) and starts them again on the same ports.
func restart(t *testing.T, ctx context.Context, rs []*testenv.Redis, idx []int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(idx))
	for j, i := range idx {
		wg.Go(func() {
			rs[i].Kill()
			errs[j] = rs[i].Start(ctx)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// acquireSeq takes and releases the lock once and returns its token's Seq.
func acquireSeq(t *testing.T, ctx context.Context, c *lease.Client, n string) uint64 {
	t.Helper()
	l, err := c.TryAcquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	return l.Token().Seq
}

// TestQuorumFencingSurvivesMinorityRestarts restarts a random minority of
// five nodes empty before each of 100 acquisitions. With quorum fencing the
// tokens strictly increase (and every node's counter has caught up after each
// acquisition). Without it no counter is kept at all: every Seq is 0.
func TestQuorumFencingSurvivesMinorityRestarts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fencing bool
		seed    uint64
	}{
		{"on", true, uint64(time.Now().UnixNano())},
		{"off", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, rdbs := ownNodes(t, 5)
			ctx := ctxFor(t, 60*time.Second)
			c := newLocker(t, rdbs, redlock.WithQuorumFencing(tc.fencing), redlock.WithNodeTimeout(time.Second))
			n := name(t)
			keys := protocol.KeysFor(lease.DefaultPrefix, n)
			t.Logf("seed %d", tc.seed)
			rng := rand.New(rand.NewPCG(tc.seed, 0))

			var prev uint64
			backwards := 0
			for i := range 100 {
				restart(t, ctx, rs, rng.Perm(5)[:1+rng.IntN(2)])
				seq := acquireSeq(t, ctx, c, n)
				if seq <= prev {
					backwards++
				}
				prev = seq
				if !tc.fencing {
					require.Zero(t, seq, "acquisition %d: unfenced, no counter", i)
					continue
				}
				require.Zero(t, backwards, "acquisition %d: the token went backwards to %d", i, seq)
				// The write-back reached every node: each counter is at least seq.
				for j, rdb := range rdbs {
					st, err := protocol.Inspect(ctx, rdb, keys)
					require.NoError(t, err)
					require.GreaterOrEqual(t, st.LastSeq, seq, "acquisition %d, node %d", i, j)
				}
			}
			if !tc.fencing {
				for j, rdb := range rdbs {
					st, err := protocol.Inspect(ctx, rdb, keys)
					require.NoError(t, err)
					assert.Zero(t, st.LastSeq, "node %d: an unfenced lock leaves no counter", j)
				}
			}
		})
	}
}

// rotation restarts every node, a minority at a time, between acquisitions.
// Without write-back the node that had the highest counter would eventually
// be restarted while the others lag, and the token would go backwards.
var rotation = [][]int{nil, nil, {0, 1}, {2, 3}, {4}}

func TestQuorumFencingRotation(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 30*time.Second)
	c := newLocker(t, rdbs, redlock.WithQuorumFencing(true), redlock.WithNodeTimeout(time.Second))
	n := "rotation"
	var seqs []uint64
	for _, idx := range rotation {
		restart(t, ctx, rs, idx)
		seqs = append(seqs, acquireSeq(t, ctx, c, n))
	}
	t.Logf("tokens %v", seqs)
	for i := 1; i < len(seqs); i++ {
		assert.Greater(t, seqs[i], seqs[i-1], "tokens %v", seqs)
	}
}
