package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
)

// echo returns its argument, or fails with an error reply naming it when
// its key is "fail".
var echo = redis.NewScript(`
if KEYS[1] == 'fail' then return redis.error_reply('ERR failed ' .. ARGV[1]) end
return ARGV[1]`)

// incr counts its calls in its key.
var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// pipelines counts the pipelines a client sends and their commands.
type pipelines struct{ sent, cmds atomic.Int64 }

func (h *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.sent.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// newRedis starts a Redis for one test and returns it with a batching
// Client over a go-redis client for it: a plain one, or with ctxClient one
// that honours context deadlines (testenv.CtxClient). Both are closed at
// cleanup.
func newRedis(t *testing.T, ctxClient bool) (*testenv.Redis, redis.UniversalClient, *Client) {
	t.Helper()
	r := testenv.NewRedis(t)
	var rdb redis.UniversalClient
	if ctxClient {
		rdb = testenv.CtxClient(t, r.Addr(), 1)
	} else {
		c := r.Client()
		t.Cleanup(func() { c.Close() })
		rdb = c
	}
	c := New(rdb)
	t.Cleanup(func() { c.Close() })
	return r, rdb, c
}

// state returns the running and idle senders.
func (c *Client) state() (senders, idle int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.senders, c.idle
}

// waitNoSenders waits until c has no sender goroutine, for at most d, and
// reports whether it saw none.
func waitNoSenders(c *Client, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if n, _ := c.state(); n == 0 {
			return true
		}
	}
	n, _ := c.state()
	return n == 0
}

// TestConcurrentCallersGetTheirOwnReplies: 500 goroutines each run the
// script a few times, some of them an error: every call gets its own value
// or its own error, and the calls went out in fewer pipelines than calls.
// Then the script cache is flushed: EVALSHA's NOSCRIPT, within pipelines,
// falls back to EVAL for every caller.
func TestConcurrentCallersGetTheirOwnReplies(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	defer rdb.Close()
	var h pipelines
	rdb.AddHook(&h)
	c := New(rdb)
	defer c.Close()
	ctx := t.Context()

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
					v, err := echo.Run(ctx, c, []string{key}, want).Result()
					if key == "fail" {
						var rerr redis.Error
						if assert.ErrorAs(t, err, &rerr) {
							assert.Equal(t, "ERR failed "+want, rerr.Error())
						}
						assert.False(t, protocol.MayHaveRun(err), "an error reply did not run")
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
	sent, cmds := h.sent.Load(), h.cmds.Load()
	t.Logf("%d script calls in %d pipelines", cmds, sent)
	assert.GreaterOrEqual(t, cmds, int64(2000), "every call went out in a pipeline")
	assert.Less(t, sent, cmds/4, "concurrent calls shared pipelines")

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	round("flushed")
}

// TestOrderPerCaller: one caller's calls run in the order made, while other
// callers fill the same pipelines.
func TestOrderPerCaller(t *testing.T) {
	_, _, c := newRedis(t, false)
	ctx := t.Context()
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Go(func() {
			key := fmt.Sprintf("order-%d", g)
			for i := 1; i <= 40; i++ {
				n, err := incr.Run(ctx, c, []string{key}).Int64()
				if !assert.NoError(t, err) || !assert.Equal(t, int64(i), n) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestFrozenServerEachCallerKeepsItsDeadline: against a frozen Redis,
// callers with different deadlines queued together each return at their
// own, with the context's error (one that may have run, unless it was
// never sent: then it wraps ErrNotSent), and the senders
// end by the latest deadline while the server is still frozen.
func TestFrozenServerEachCallerKeepsItsDeadline(t *testing.T) {
	r, rdb, c := newRedis(t, true)
	require.NoError(t, echo.Load(t.Context(), rdb).Err())
	require.NoError(t, r.Pause())
	defer r.Resume()

	deadlines := []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, 1200 * time.Millisecond}
	type result struct {
		took time.Duration
		err  error
	}
	results := make([]result, 3*len(deadlines))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), deadlines[i%len(deadlines)])
			defer cancel()
			err := echo.Run(ctx, c, []string{"ok"}, "x").Err()
			results[i] = result{time.Since(start), err}
		})
	}
	wg.Wait()
	sent := 0
	for i, res := range results {
		d := deadlines[i%len(deadlines)]
		t.Logf("caller %d (deadline %v): returned after %v: %v", i, d, res.took.Round(time.Millisecond), res.err)
		// Even the callers with the latest deadline, that of the pipeline
		// itself, get their context's error.
		assert.ErrorIs(t, res.err, context.DeadlineExceeded, "caller %d", i)
		// One whose call a sender took may have run; one still queued
		// behind the stuck senders was never sent, and says so.
		assert.Equal(t, !errors.Is(res.err, ErrNotSent), protocol.MayHaveRun(res.err), "caller %d: %v", i, res.err)
		if !errors.Is(res.err, ErrNotSent) {
			sent++
		}
		if i%len(deadlines) < len(deadlines)-1 {
			// It did not wait for the pipeline, which waits for the next
			// deadline at least.
			assert.Less(t, res.took, deadlines[i%len(deadlines)+1], "caller %d returned at its own deadline", i)
		}
	}
	assert.Positive(t, sent, "calls were sent, and may have run")
	// The pipelines ended at the latest deadline: no sender is left stuck
	// on the frozen server.
	assert.True(t, waitNoSenders(c, 2*time.Second), "the senders ended while the server is frozen")
}

// busySenders starts MaxInFlight callers of incr with a long deadline (3s),
// one at a time, so that each has a sender of its own, stuck on the frozen
// server behind c. Wait on the group once the server runs again.
func busySenders(t *testing.T, ctx context.Context, c *Client) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for i := range MaxInFlight {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			assert.NoError(t, incr.Run(ctx, c, []string{"busy"}).Err())
		})
		require.Eventually(t, func() bool { n, idle := c.state(); return n == i+1 && idle == 0 },
			time.Second, time.Millisecond, "sender %d busy", i)
	}
	return &wg
}

// TestLeftCallerIsSkipped: a caller that gives up while its call is still
// queued (every sender busy with a frozen server) is left out of the next
// pipeline: its call never runs.
func TestLeftCallerIsSkipped(t *testing.T) {
	r, rdb, c := newRedis(t, true)
	ctx := t.Context()
	require.NoError(t, incr.Load(ctx, rdb).Err())
	require.NoError(t, r.Pause())

	wg := busySenders(t, ctx, c)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := incr.Run(short, c, []string{"left"}).Err()
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, ErrNotSent, "it was never sent")
	assert.False(t, protocol.MayHaveRun(err), "a call never sent did not run: %v", err)

	require.NoError(t, r.Resume())
	wg.Wait()
	// The busy calls ran; a call after them shows the queue is drained.
	n, err := incr.Run(ctx, c, []string{"busy"}).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(MaxInFlight+1), n)
	left, err := rdb.Exists(ctx, "left").Result()
	require.NoError(t, err)
	assert.Zero(t, left, "the call whose caller left before it was sent did not run")
}

// TestEndedContextIsNotSent: a call with an ended context fails at once
// with its error, without I/O.
func TestEndedContextIsNotSent(t *testing.T) {
	c := New(testenv.CtxClient(t, testenv.ClosedAddr(t), 1))
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := c.EvalSha(ctx, "0123", []string{"k"}).Err()
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, ErrNotSent)
	assert.False(t, protocol.MayHaveRun(err), "a call never sent did not run: %v", err)
	n, _ := c.state()
	assert.Zero(t, n, "no sender started")
}

// TestRefusedConnectionDidNotRun: when the pipeline cannot connect, every
// caller gets the dial error, which did not run.
func TestRefusedConnectionDidNotRun(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	c := New(rdb)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			err := echo.Run(ctx, c, []string{"ok"}, "x").Err()
			assert.Error(t, err)
			assert.False(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
			assert.False(t, protocol.MayHaveRun(err), "a refused connection did not run: %v", err)
		})
	}
	wg.Wait()
}

// TestNoGoroutineLeak: after a burst and Close, every sender has ended;
// calls after Close still work and leave no sender behind.
func TestNoGoroutineLeak(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	defer rdb.Close()
	ctx := t.Context()
	require.NoError(t, rdb.Ping(ctx).Err())
	before := runtime.NumGoroutine()

	c := New(rdb)
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() { assert.NoError(t, echo.Run(ctx, c, []string{"ok"}, "x").Err()) })
	}
	wg.Wait()
	n, _ := c.state()
	assert.Positive(t, n, "idle senders wait for more work before Close")
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "closing twice is fine")
	assert.True(t, waitNoSenders(c, time.Second), "Close ended the idle senders")

	v, err := echo.Run(ctx, c, []string{"ok"}, "after").Text()
	require.NoError(t, err, "a call after Close works")
	assert.Equal(t, "after", v)
	assert.True(t, waitNoSenders(c, time.Second), "and its sender ended")

	after := runtime.NumGoroutine()
	for end := time.Now().Add(5 * time.Second); after > before && time.Now().Before(end); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// TestIdleSendersExit: without Close, senders exit after senderIdle.
func TestIdleSendersExit(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	defer rdb.Close()
	c := New(rdb)
	var wg sync.WaitGroup
	for range 50 { // concurrent: some go out batched, through a sender
		wg.Go(func() { assert.NoError(t, echo.Run(t.Context(), c, []string{"ok"}, "x").Err()) })
	}
	wg.Wait()
	n, _ := c.state()
	assert.Positive(t, n)
	// A sender marks itself idle just after it hands out its replies.
	assert.Eventually(t, func() bool { n, idle := c.state(); return n == idle }, time.Second, time.Millisecond, "all idle")
	assert.True(t, waitNoSenders(c, 5*senderIdle), "the idle senders exited")
}

// TestLoneCallIsDirect: a call made while nothing else is queued or in
// flight goes out on the caller's goroutine, as a plain command (through
// the client's ProcessHook), and starts no sender.
func TestLoneCallIsDirect(t *testing.T) {
	_, rdb, c := newRedis(t, false)
	require.NoError(t, rdb.Ping(t.Context()).Err()) // the connection's set-up is a pipeline
	var h pipelines
	rdb.(*redis.Client).AddHook(&h)
	for i := range 10 {
		v, err := echo.Run(t.Context(), c, []string{"ok"}, i).Int()
		require.NoError(t, err)
		assert.Equal(t, i, v)
	}
	assert.Zero(t, h.sent.Load(), "no pipeline")
	n, _ := c.state()
	assert.Zero(t, n, "no sender")
}

// TestNilClose: a nil Client's Close is a no-op.
func TestNilClose(t *testing.T) {
	var c *Client
	assert.NoError(t, c.Close())
}

// TestSetNXAndPTTL: the batched SET NX and PTTL build the commands
// go-redis does (ms and s expirations, none, KEEPTTL) and read their
// replies alike; Pipelined runs its commands together, in order, and
// returns them typed.
func TestSetNXAndPTTL(t *testing.T) {
	_, rdb, c := newRedis(t, false)
	ctx := t.Context()

	ok, err := c.SetNX(ctx, "px", "v", 1500*time.Millisecond).Result()
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = c.SetNX(ctx, "px", "w", time.Second).Result()
	require.NoError(t, err)
	assert.False(t, ok, "held")
	d, err := c.PTTL(ctx, "px").Result()
	require.NoError(t, err)
	assert.InDelta(t, 1500*time.Millisecond, d, float64(500*time.Millisecond))
	require.True(t, c.SetNX(ctx, "ex", "v", 7*time.Second).Val())
	assert.InDelta(t, 7*time.Second, rdb.PTTL(ctx, "ex").Val(), float64(time.Second))
	require.True(t, c.SetNX(ctx, "none", "v", 0).Val())
	assert.Equal(t, time.Duration(-1), c.PTTL(ctx, "none").Val(), "no expiry")
	assert.Equal(t, time.Duration(-2), c.PTTL(ctx, "missing").Val(), "no key")
	assert.False(t, c.SetNX(ctx, "none", "w", redis.KeepTTL).Val())
	assert.Equal(t, "v", rdb.Get(ctx, "none").Val())

	var wg sync.WaitGroup
	for g := range 200 {
		wg.Go(func() {
			key := fmt.Sprintf("pipelined-%d", g%50) // four goroutines per key
			cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.SetNX(ctx, key, g, time.Minute)
				p.PTTL(ctx, key)
				return nil
			})
			if !assert.NoError(t, err) || !assert.Len(t, cmds, 2) {
				return
			}
			assert.IsType(t, &redis.BoolCmd{}, cmds[0])
			pttl, ok := cmds[1].(*redis.DurationCmd)
			if assert.True(t, ok) {
				assert.Greater(t, pttl.Val(), 50*time.Second, "the PTTL ran after the SET")
			}
		})
	}
	wg.Wait()
	_, err = c.Pipelined(ctx, func(redis.Pipeliner) error { return errors.New("fn failed") })
	assert.EqualError(t, err, "fn failed")
}

// TestPipelinedLeftReturnsFreshCommands: a Pipelined caller that leaves a
// frozen server gets commands of the same kinds, carrying its context's
// error, not the ones the sender may still write.
func TestPipelinedLeftReturnsFreshCommands(t *testing.T) {
	r, rdb, c := newRedis(t, true)
	require.NoError(t, rdb.Ping(t.Context()).Err())
	require.NoError(t, r.Pause())
	defer r.Resume()
	// A call stuck on the frozen server, sent directly: the next one is
	// batched.
	stuck := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		stuck <- echo.Run(ctx, c, []string{"ok"}, "x").Err()
	}()
	require.Eventually(t, func() bool { n, idle := c.state(); return n == 1 && idle == 0 }, time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	var sent []redis.Cmder
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		sent = append(sent, p.SetNX(ctx, "k", "v", time.Second), p.PTTL(ctx, "k"))
		return nil
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, cmds, 2)
	for i, cmd := range cmds {
		assert.NotSame(t, sent[i], cmd, "a fresh command")
		assert.Equal(t, sent[i].Args(), cmd.Args())
		assert.ErrorIs(t, cmd.Err(), context.DeadlineExceeded)
	}
	assert.IsType(t, &redis.BoolCmd{}, cmds[0])
	assert.IsType(t, &redis.DurationCmd{}, cmds[1])
	assert.ErrorIs(t, <-stuck, context.DeadlineExceeded)
}

// TestTrackerSeal: a Tracker sealed while the tracked call is still queued
// (every sender busy with a frozen server) reports that nothing went out,
// and the call never does: its caller gets ErrNotSent at its deadline and
// the script did not run. A tracker sealed after its call went out says
// so.
func TestTrackerSeal(t *testing.T) {
	r, rdb, c := newRedis(t, true)
	ctx := t.Context()
	require.NoError(t, incr.Load(ctx, rdb).Err())

	sentCtx, sent := Track(ctx)
	require.NoError(t, incr.Run(sentCtx, c, []string{"sent"}).Err())
	assert.True(t, sent.Seal(), "the call went out")
	assert.True(t, (*Tracker)(nil).Seal(), "a nil tracker cannot tell: it may have")

	require.NoError(t, r.Pause())
	wg := busySenders(t, ctx, c)
	queued, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	queued, tr := Track(queued)
	errc := make(chan error, 1)
	go func() { errc <- incr.Run(queued, c, []string{"sealed"}).Err() }()
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.queue) == 1 },
		time.Second, time.Millisecond, "the call is queued")
	assert.False(t, tr.Seal(), "the queued call has not gone out")

	require.NoError(t, r.Resume())
	wg.Wait()
	err := <-errc
	assert.ErrorIs(t, err, ErrNotSent)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, protocol.MayHaveRun(err))
	n, err := rdb.Exists(ctx, "sealed").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the sealed call never ran")
}
