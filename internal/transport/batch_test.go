package transport

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
)

// echo returns its argument, or fails with an error reply naming it when
// its key is "fail".
var echo = redis.NewScript(`
if KEYS[1] == 'fail' then return redis.error_reply('ERR failed ' .. ARGV[1]) end
return ARGV[1]`)

// incr counts its calls in its key.
var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// run runs script s through t, as the lease's calls do.
func run(ctx context.Context, t *Transport, s *redis.Script, key string, args ...any) (any, Sent, error) {
	return Send(ctx, t, func(ctx context.Context, c Conn) (any, error) {
		return s.Run(ctx, c, []string{key}, args...).Result()
	})
}

// counting is a wrapper a caller might pass: it counts the pipelines and
// script calls that go through its own methods.
type counting struct {
	*redis.Client
	pipelines, cmds, scripts atomic.Int64
}

func (c *counting) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	cmds, err := c.Client.Pipelined(ctx, fn)
	c.pipelines.Add(1)
	c.cmds.Add(int64(len(cmds)))
	return cmds, err
}

func (c *counting) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.scripts.Add(1)
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c *counting) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.scripts.Add(1)
	return c.Client.Eval(ctx, script, keys, args...)
}

// state returns the senders (and direct calls) in flight and the idle
// senders.
func (t *Transport) state() (senders, idle int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.senders, t.idle
}

// TestConcurrentCallersGetTheirOwnReplies: 500 goroutines each run a
// script a few times, some of them an error reply: every call gets its own
// value or its own error, all Ran, and they went out in far fewer
// pipelines than calls, through the caller's own client type. After
// SCRIPT FLUSH, EVALSHA's NOSCRIPT within pipelines falls back to EVAL for
// every caller.
func TestConcurrentCallersGetTheirOwnReplies(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb := &counting{Client: r.Client()}
	t.Cleanup(func() { rdb.Close() })
	tr := NewTransport(rdb, true)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	ctx := t.Context()
	require.NoError(t, echo.Load(ctx, rdb).Err())

	round := func(name string) {
		const goroutines, calls = 500, 4
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range calls {
					want := fmt.Sprintf("%s-%d-%d", name, g, i)
					key := "ok"
					if (g+i)%7 == 0 {
						key = "fail"
					}
					v, sent, err := run(ctx, tr, echo, key, want)
					assert.Equal(t, Ran, sent, "%s: %v", want, err)
					if key == "fail" {
						var rerr redis.Error
						if assert.ErrorAs(t, err, &rerr) {
							assert.Equal(t, "ERR failed "+want, rerr.Error())
						}
						continue
					}
					if assert.NoError(t, err) {
						assert.Equal(t, want, v)
					}
				}
			})
		}
		wg.Wait()
	}
	round("loaded")
	pipes, cmds := rdb.pipelines.Load(), rdb.cmds.Load()
	t.Logf("%d script calls in %d pipelines, %d direct", cmds, pipes, rdb.scripts.Load())
	assert.Equal(t, int64(2000), cmds+rdb.scripts.Load(), "every call went through the caller's client")
	assert.Less(t, pipes, cmds/4, "concurrent calls shared pipelines")

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	round("flushed")
}

// busy makes tr's maxInFlight slots busy on the frozen server: a direct
// call, then pipelines, each with a deadline of 3s. Wait on the group once
// the server runs again.
func busy(t *testing.T, tr *Transport) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for i := range maxInFlight {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			_, sent, err := run(ctx, tr, incr, "busy")
			assert.NoError(t, err)
			assert.Equal(t, Ran, sent)
		})
		require.Eventually(t, func() bool { n, idle := tr.state(); return n == i+1 && idle == 0 },
			time.Second, time.Millisecond, "slot %d busy", i)
	}
	return &wg
}

// TestLeftCallerNeverRuns: a caller that gives up while its call is still
// queued (every slot busy with a frozen server) returns NotSent, and its
// call never runs, even once the server resumes.
func TestLeftCallerNeverRuns(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb := testenv.CtxClient(t, r.Addr(), 1)
	tr := NewTransport(rdb, true)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	ctx := t.Context()
	require.NoError(t, incr.Load(ctx, rdb).Err())
	require.NoError(t, r.Pause())
	t.Cleanup(func() { _ = r.Resume() })

	wg := busy(t, tr)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, sent, err := run(short, tr, incr, "left")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, NotSent, sent, "it was still queued")

	require.NoError(t, r.Resume())
	wg.Wait()
	n, _, err := run(ctx, tr, incr, "busy")
	require.NoError(t, err)
	assert.Equal(t, int64(maxInFlight+1), n, "the busy calls ran once each")
	left, err := rdb.Exists(ctx, "left").Result()
	require.NoError(t, err)
	assert.Zero(t, left, "the call whose caller left before it was sent did not run")
}

// TestFrozenServerEachCallerKeepsItsDeadline: against a frozen Redis,
// callers with different deadlines each return at their own with its
// error, MayHaveRun when their call went out and NotSent when it was
// still queued behind the busy slots; the senders end by the latest deadline while the
// server is still frozen.
func TestFrozenServerEachCallerKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb := testenv.CtxClient(t, r.Addr(), 1)
	tr := NewTransport(rdb, true)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	require.NoError(t, echo.Load(t.Context(), rdb).Err())
	require.NoError(t, r.Pause())
	t.Cleanup(func() { _ = r.Resume() })

	// The first wave (deadline 1.5s) fills both slots on the frozen
	// server: a direct call, then a pipeline. The second, with shorter and
	// different deadlines, queues behind them.
	const busyFor = 1500 * time.Millisecond
	deadlines := []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, 1200 * time.Millisecond}
	type result struct {
		took time.Duration
		sent Sent
		err  error
	}
	start := time.Now()
	var wg sync.WaitGroup
	call := func(d time.Duration, res *result) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			_, sent, err := run(ctx, tr, echo, "ok", "x")
			*res = result{time.Since(start), sent, err}
		})
	}
	busy := make([]result, maxInFlight)
	for i := range busy {
		call(busyFor, &busy[i])
		require.Eventually(t, func() bool { n, idle := tr.state(); return n == i+1 && idle == 0 },
			time.Second, time.Millisecond, "slot %d busy", i)
	}
	queued := make([]result, 3*len(deadlines))
	for i := range queued {
		call(deadlines[i%len(deadlines)], &queued[i])
	}
	wg.Wait()
	for i, res := range busy {
		t.Logf("busy caller %d: returned after %v, sent %d: %v", i, res.took.Round(time.Millisecond), res.sent, res.err)
		assert.ErrorIs(t, res.err, context.DeadlineExceeded, "busy caller %d", i)
		assert.Equal(t, MayHaveRun, res.sent, "busy caller %d: its call went out, no reply", i)
	}
	for i, res := range queued {
		d := deadlines[i%len(deadlines)]
		t.Logf("caller %d (deadline %v): returned after %v, sent %d: %v", i, d, res.took.Round(time.Millisecond), res.sent, res.err)
		assert.ErrorIs(t, res.err, context.DeadlineExceeded, "caller %d", i)
		assert.Equal(t, NotSent, res.sent, "caller %d was queued until it left", i)
		if i%len(deadlines) < len(deadlines)-1 {
			assert.Less(t, res.took, deadlines[i%len(deadlines)+1], "caller %d returned at its own deadline", i)
		}
	}
	assert.Eventually(t, func() bool { n, _ := tr.state(); return n == 0 }, 2*time.Second, 5*time.Millisecond,
		"the senders ended while the server is frozen")
}

// TestEndedContextIsNotSent: a call with an ended context is not made, and
// starts no sender.
func TestEndedContextIsNotSent(t *testing.T) {
	tr := NewTransport(testenv.CtxClient(t, testenv.ClosedAddr(t), 1), true)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, sent, err := run(ctx, tr, echo, "ok", "x")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, NotSent, sent)
	n, _ := tr.state()
	assert.Zero(t, n, "no sender started")
}

// TestNoGoroutineAfterClose: after a burst, idle senders wait for more
// work; Close ends them all, calls after Close go out directly, and no
// goroutine is left.
func TestNoGoroutineAfterClose(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	defer rdb.Close()
	ctx := t.Context()
	require.NoError(t, rdb.Ping(ctx).Err())
	before := runtime.NumGoroutine()

	tr := NewTransport(rdb, true)
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			_, _, err := run(ctx, tr, echo, "ok", "x")
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	n, idle := tr.state()
	assert.Positive(t, idle, "idle senders wait for more work before Close (%d in flight)", n)
	require.NoError(t, tr.Close(ctx))
	require.NoError(t, tr.Close(ctx), "closing twice is fine")
	n, _ = tr.state()
	assert.Zero(t, n, "Close waited for the senders")

	v, sent, err := run(ctx, tr, echo, "ok", "after")
	require.NoError(t, err, "a call after Close works")
	assert.Equal(t, "after", v)
	assert.Equal(t, Ran, sent)

	after := runtime.NumGoroutine()
	for end := time.Now().Add(5 * time.Second); after > before && time.Now().Before(end); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// TestPipelinedBatched: commands queued with Pipelined go out together
// within a shared pipeline and come back in their own kinds; a caller that
// leaves while queued gets fresh commands of the same kinds carrying its
// error, and NotSent.
func TestPipelinedBatched(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb := testenv.CtxClient(t, r.Addr(), 1)
	tr := NewTransport(rdb, true)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	ctx := t.Context()
	setPTTL := func(ctx context.Context, key string) ([]redis.Cmder, Sent, error) {
		return Send(ctx, tr, func(ctx context.Context, c Conn) ([]redis.Cmder, error) {
			return c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.SetNX(ctx, key, "v", time.Minute)
				p.PTTL(ctx, key)
				return nil
			})
		})
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			cmds, sent, err := setPTTL(ctx, fmt.Sprintf("k%d", i%50))
			require.NoError(t, err)
			assert.Equal(t, Ran, sent)
			require.Len(t, cmds, 2)
			_, ok1 := cmds[0].(*redis.BoolCmd)
			pttl, ok2 := cmds[1].(*redis.DurationCmd)
			assert.True(t, ok1 && ok2, "%T %T", cmds[0], cmds[1])
			assert.Greater(t, pttl.Val(), 50*time.Second)
		})
	}
	wg.Wait()

	require.NoError(t, r.Pause())
	t.Cleanup(func() { _ = r.Resume() })
	wg2 := busy(t, tr)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	cmds, sent, err := setPTTL(short, "left")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, NotSent, sent)
	require.Len(t, cmds, 2)
	_, ok1 := cmds[0].(*redis.BoolCmd)
	_, ok2 := cmds[1].(*redis.DurationCmd)
	assert.True(t, ok1 && ok2, "fresh commands of the same kinds: %T %T", cmds[0], cmds[1])
	require.NoError(t, r.Resume())
	wg2.Wait()
	n, err := rdb.Exists(ctx, "left").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the left call never ran")
}
