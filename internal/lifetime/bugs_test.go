package lifetime_test

// Regression tests of bugs found by these tests (each failed before its
// fix).

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fencelock/fencelock/internal/lifetime"
)

// A Release with a context that has already ended (a `defer l.Release(ctx)`
// after ctx timed out, or after SIGTERM cancelled it) must still release:
// Release documents that a release that cannot finish under ctx goes on in
// the background. lockOp's select picks at random between a free op token
// and ctx.Done(); when it takes the token, the backend is called once with
// the dead ctx (go-redis then fails at once, without sending) and nothing
// retries, so about half of such Releases leave the lock for its whole ttl.
func TestBugReleaseWithEndedCtxReleases(t *testing.T) {
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	const n = 40
	var done atomic.Int64
	for range n {
		f := &fake{releaseFn: func(ctx context.Context, _ int) error {
			if err := ctx.Err(); err != nil {
				return err // as go-redis does: no I/O under an ended ctx
			}
			done.Add(1)
			return nil
		}}
		l := start(t, f, time.Now(), time.Minute, config())
		_ = l.Release(dead)
	}
	// Each background release needs one attempt under a live context.
	deadline := time.Now().Add(2 * time.Second)
	for done.Load() < n && time.Now().Before(deadline) {
		time.Sleep(tick)
	}
	assert.EqualValues(t, n, done.Load(), "releases with an ended ctx that reached the backend under a live context")
}

// Refresh and Reissue on an ended lease return its Err without I/O (the
// documented contract; on a nil lease: an error wrapping Invalid). With a
// ctx that has already ended they return ctx.Err() instead about half the
// time: lockOp's select runs before live() looks at the lease.
func TestBugEndedLeaseErrWithEndedCtx(t *testing.T) {
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	nilLife := lifetime.Nil(config())
	ended := start(t, &fake{}, time.Now(), time.Minute, config())
	ended.End(errReleased)
	var wrong int
	for range 40 {
		if err := nilLife.Refresh(dead, time.Minute); !errors.Is(err, errInvalid) {
			wrong++
		}
		if _, err := nilLife.Reissue(dead, 1); !errors.Is(err, errInvalid) {
			wrong++
		}
		if err := ended.Refresh(dead, time.Minute); !errors.Is(err, errReleased) {
			wrong++
		}
		if _, err := ended.Reissue(dead, 1); !errors.Is(err, errReleased) {
			wrong++
		}
	}
	assert.Zero(t, wrong, "calls of 160 that returned ctx.Err() instead of the lease's Err")
}
