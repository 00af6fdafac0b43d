// Package batch sends the concurrent script calls of many goroutines to
// Redis together, as pipelines, while each caller keeps its own deadline.
//
// go-redis sends one command per connection round trip: a thousand
// concurrent EVALSHA calls queue for the connection pool, one round trip
// each. A [Client] queues them instead, and a few sender goroutines (at most
// [MaxInFlight] at a time) each take everything queued and send it as one
// pipeline. The more callers wait, the larger the pipelines, so a burst
// costs a few round trips, not thousands. A lone caller (nothing queued or
// in flight) sends its call itself, directly, as go-redis would.
//
// Every caller waits for its own reply or its own context, whichever comes
// first: one that gives up returns ctx.Err() at its deadline, whatever its
// pipeline is doing. Its call may still run on the server (the request may
// be written already, or be written by a pipeline already under way), so
// the error is one that protocol.MayHaveRun reports as "may have run", and
// the caller treats it as a lost reply. A caller that left before its
// pipeline was built is skipped: its call never goes out, and its error
// wraps [ErrNotSent] as well as ctx.Err(), which protocol.MayHaveRun reports
// as "did not run".
//
// A pipeline runs under a context that ends at the latest deadline of its
// callers, so a frozen server holds a sender no longer than its callers
// wait. When a caller has no deadline the pipeline has none either, and the
// redis client's own ReadTimeout and WriteTimeout bound it, as they bound a
// direct call.
package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotSent is wrapped, together with the caller's ctx.Err(), by the error
// of a call whose caller's context ended before the call went out (before
// a sender took it into a pipeline, or before it was queued at all): the
// call surely did not run on the server. Test for it with errors.Is; the
// error is also errors.Is ctx.Err(). A caller that left after its call
// was taken gets plain ctx.Err(): its call may still run.
//
// Its NotSent method is how packages that must not import this one (such
// as internal/protocol) recognise it: errors.As(err, &interface{ NotSent()
// bool }).
var ErrNotSent error = notSentError{}

type notSentError struct{}

func (notSentError) Error() string {
	return "batch: not sent: the caller left before the call went out"
}

// NotSent reports true: the call did not go out.
func (notSentError) NotSent() bool { return true }

// notSent is the error of a call that did not go out because ctx ended.
func notSent(ctx context.Context) error { return fmt.Errorf("%w: %w", ctx.Err(), ErrNotSent) }

// Tracker tells whether any call made under a context went out. Attach
// one with [Track]; once the context has ended, [Tracker.Seal] says whether
// a call went out, and from then on none will: the answer is final. A
// caller that stops waiting for a call (Redlock's fan-out, at the node
// timeout) learns so whether the call may have run, even when the call
// itself has not returned yet. The zero value is not used: get one from
// Track.
type Tracker struct {
	mu     sync.Mutex
	sent   bool
	sealed bool
}

type trackerKey struct{}

// Track returns ctx with a new Tracker for the calls made under it.
func Track(ctx context.Context) (context.Context, *Tracker) {
	t := &Tracker{}
	return context.WithValue(ctx, trackerKey{}, t), t
}

// Seal reports whether a call made under the tracked context went out (or
// began to go out), and makes every call not yet sent stay unsent. Calling
// it before the context ended is allowed, but then later calls under that
// context never go out: they fail with [ErrNotSent] when the context ends.
// A nil Tracker reports true.
func (t *Tracker) Seal() bool {
	if t == nil {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
	return t.sent
}

// claim records that a call under ctx goes out, and reports false, without
// recording it, when ctx's tracker is sealed: the call must not go out.
func claim(ctx context.Context) bool {
	t, _ := ctx.Value(trackerKey{}).(*Tracker)
	if t == nil {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sealed {
		return false
	}
	t.sent = true
	return true
}

// MaxInFlight is how many pipelines one Client has in flight at most: each
// uses one connection of the redis client's pool while it runs. Two
// measured better than four in a burst of a thousand Redlock waiters
// (larger pipelines, fewer write syscalls) and the same with 64 goroutines
// acquiring in parallel.
const MaxInFlight = 2

// senderIdle is how long a sender with nothing to send waits for more
// before it exits. A sender that outlives one pipeline keeps the stack that
// go-redis's deep call path grew, instead of growing a new one per batch.
const senderIdle = 500 * time.Millisecond

// Client is a redis.UniversalClient whose script calls (EVAL, EVALSHA and
// their read-only forms), SET NX, PTTL and Pipelined are batched into
// pipelines; every other command goes to the wrapped client directly. It
// is safe for concurrent use.
//
// Batched calls run through the wrapped client's ProcessPipelineHook, not
// its ProcessHook, and under a context of their own, not the caller's: a
// hook that reads values from a command's context sees none. Lone calls
// run through ProcessHook with the caller's context.
type Client struct {
	redis.UniversalClient

	mu      sync.Mutex
	queue   []*call
	senders int           // sender goroutines running
	idle    int           // of them, those waiting for work
	wake    chan struct{} // a token per idle sender to wake
	quit    chan struct{} // closed by Close
	closed  bool

	// recorders are pipelines of the wrapped client that Pipelined uses
	// only to collect the commands of its fn.
	recorders sync.Pool
}

// New returns a Client that sends through rdb. It does no I/O and starts
// no goroutine: senders start with the first call and exit when idle.
func New(rdb redis.UniversalClient) *Client {
	return &Client{
		UniversalClient: rdb,
		wake:            make(chan struct{}, MaxInFlight),
		quit:            make(chan struct{}),
	}
}

// Unwrap returns the wrapped client.
func (c *Client) Unwrap() redis.UniversalClient { return c.UniversalClient }

// Close stops the idle senders at once, and makes every sender exit as soon
// as it has nothing to send instead of waiting for more. It does not wait
// for pipelines in flight (they end at their callers' deadlines) and does
// not close the wrapped client. Calls after Close still work: their senders
// exit when done. Closing twice, or a nil Client, is fine.
func (c *Client) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.quit)
	}
	return nil
}

// Eval runs a script, in a pipeline with the other calls queued meanwhile.
func (c *Client) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, "eval", script, keys, args)
}

// EvalSha runs a loaded script, in a pipeline with the other calls queued
// meanwhile. Its error is a NOSCRIPT error reply when the server does not
// have the script; redis.Script.Run then falls back to Eval.
func (c *Client) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, "evalsha", sha1, keys, args)
}

// EvalRO is Eval's read-only form (EVAL_RO).
func (c *Client) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, "eval_ro", script, keys, args)
}

// EvalShaRO is EvalSha's read-only form (EVALSHA_RO).
func (c *Client) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, "evalsha_ro", sha1, keys, args)
}

// script runs a script command as go-redis builds it: name, script or
// sha, the key count, the keys, the arguments. name is an any so that the
// callers' constant names are boxed without an allocation.
func (c *Client) script(ctx context.Context, name any, script string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	return do(c, ctx, redis.NewCmd(ctx, a...), redis.NewCmd)
}

// SetNX is SET key value NX with an expiration, as go-redis's, in a
// pipeline with the other calls queued meanwhile: the unfenced Redlock
// acquire.
func (c *Client) SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd {
	var args []any
	switch {
	case expiration == 0:
		args = []any{"set", key, value, "nx"}
	case expiration == redis.KeepTTL:
		args = []any{"set", key, value, "keepttl", "nx"}
	case expiration < time.Second || expiration%time.Second != 0:
		args = []any{"set", key, value, "px", max(expiration.Milliseconds(), 1), "nx"}
	default:
		args = []any{"set", key, value, "ex", int64(expiration / time.Second), "nx"}
	}
	return do(c, ctx, redis.NewBoolCmd(ctx, args...), redis.NewBoolCmd)
}

// PTTL is PTTL key, in a pipeline with the other calls queued meanwhile.
func (c *Client) PTTL(ctx context.Context, key string) *redis.DurationCmd {
	return do(c, ctx, redis.NewDurationCmd(ctx, time.Millisecond, "pttl", key),
		func(ctx context.Context, args ...any) *redis.DurationCmd {
			return redis.NewDurationCmd(ctx, time.Millisecond, args...)
		})
}

// Pipelined runs the commands fn queues as one call: together, in order,
// in a pipeline with the other calls queued meanwhile. Like go-redis's, it
// returns the commands and the first error among them. When ctx ends first
// they are fresh commands of the same kinds carrying ctx's error (plain
// *redis.Cmd for kinds other than those of Cmd, BoolCmd, IntCmd,
// StatusCmd, StringCmd and DurationCmd). Pipeline, TxPipeline and
// TxPipelined are the wrapped client's: not batched.
func (c *Client) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	p, _ := c.recorders.Get().(redis.Pipeliner)
	if p == nil {
		p = c.UniversalClient.Pipeline()
	}
	err := fn(p)
	cmds := slices.Clone(p.Cmds())
	p.Discard()
	c.recorders.Put(p)
	if err != nil {
		return nil, err
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if werr := c.wait(ctx, cmds); werr != nil {
		// cmds, slice and commands, may still be read and written by a
		// sender: the caller gets new ones.
		left := make([]redis.Cmder, len(cmds))
		for i, cmd := range cmds {
			left[i] = freshCmd(ctx, cmd)
			left[i].SetErr(werr)
		}
		cmds = left
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// freshCmd returns a new command of cmd's kind with its arguments, for a
// caller that left: cmd itself may still be written by a sender.
func freshCmd(ctx context.Context, cmd redis.Cmder) redis.Cmder {
	args := cmd.Args() // set when cmd was made, only read since
	switch cmd.(type) {
	case *redis.BoolCmd:
		return redis.NewBoolCmd(ctx, args...)
	case *redis.IntCmd:
		return redis.NewIntCmd(ctx, args...)
	case *redis.StatusCmd:
		return redis.NewStatusCmd(ctx, args...)
	case *redis.StringCmd:
		return redis.NewStringCmd(ctx, args...)
	case *redis.DurationCmd:
		return redis.NewDurationCmd(ctx, time.Millisecond, args...)
	}
	return redis.NewCmd(ctx, args...)
}

// call is one queued call: its commands go out together, in order. The
// sender processes them in a pipeline, then closes done; the caller reads
// them only after done is closed, and a caller that left returns fresh
// commands instead, so it shares nothing with the sender.
type call struct {
	ctx   context.Context
	cmds  []redis.Cmder
	done  chan struct{}
	taken bool // a sender took it into a pipeline; guarded by Client.mu
}

// do queues cmd and waits for its reply or ctx, whichever comes first. When
// ctx ends first it returns a command made by fresh with ctx's error (which
// wraps ErrNotSent too when the call did not go out).
func do[C redis.Cmder](c *Client, ctx context.Context, cmd C, fresh func(context.Context, ...any) C) C {
	if ctx == nil {
		ctx = context.Background()
	}
	err := c.wait(ctx, []redis.Cmder{cmd})
	if err == nil {
		return cmd
	}
	// The call may be in a pipeline under way (a lost reply to the
	// caller), or surely not sent (err says which).
	left := fresh(ctx, cmd.Args()...)
	left.SetErr(err)
	return left
}

// wait queues cmds as one call and waits for their replies or ctx,
// whichever comes first. It returns nil when the replies came, else the
// caller's error: ctx.Err(), wrapped with ErrNotSent when ctx ended before
// a sender took the call (the call is then skipped: it never runs).
func (c *Client) wait(ctx context.Context, cmds []redis.Cmder) error {
	if ctx.Err() != nil {
		return notSent(ctx)
	}
	if sent, err := c.direct(ctx, cmds); sent {
		return err
	}
	cl := &call{ctx: ctx, cmds: cmds, done: make(chan struct{})}
	c.enqueue(cl)
	select {
	case <-cl.done:
		if atDeadline(ctx, cmds) {
			// The pipeline ran out of time at this caller's deadline
			// (its own, which is the latest of its callers') a moment
			// before the caller's context did: the caller left at its
			// deadline, and its context says so when it returns.
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		taken := cl.taken
		c.mu.Unlock()
		if !taken {
			// take skips it from now on: its ctx has ended.
			return notSent(ctx)
		}
		return ctx.Err()
	}
}

// direct sends cmds on the caller's own goroutine, as go-redis does without
// batching, when nothing else is queued or in flight, and reports whether it
// did. A lone call then costs no switch to a sender and back (about a fifth
// of an uncontended acquire+release). It counts as a sender while it runs,
// so the calls made meanwhile go out batched. Its deadline is go-redis's:
// with ContextTimeoutEnabled the caller's context, else ReadTimeout.
//
// It reports false when it did not take the call; true and nil when it
// sent it; true and an error wrapping ErrNotSent when the call's Tracker
// was sealed meanwhile (it did not send it).
func (c *Client) direct(ctx context.Context, cmds []redis.Cmder) (bool, error) {
	c.mu.Lock()
	if len(c.queue) > 0 || c.senders > c.idle {
		c.mu.Unlock()
		return false, nil
	}
	c.senders++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.senders--
		if len(c.queue) > 0 && c.senders == c.idle {
			c.kick() // queued meanwhile behind this call alone
		}
		c.mu.Unlock()
	}()
	if !claim(ctx) {
		return true, notSent(ctx)
	}
	if len(cmds) == 1 {
		_ = c.UniversalClient.Process(ctx, cmds[0])
	} else {
		p := c.UniversalClient.Pipeline()
		_ = p.BatchProcess(ctx, cmds...)
		_, _ = p.Exec(ctx)
	}
	if atDeadline(ctx, cmds) {
		// As a batched caller's: the context's error at its deadline,
		// not the socket's timeout that fired a moment before.
		<-ctx.Done()
		for _, cmd := range cmds {
			if timedOut([]redis.Cmder{cmd}) {
				cmd.SetErr(ctx.Err())
			}
		}
	}
	return true, nil
}

// atDeadline reports whether cmds failed with a timeout as ctx's deadline
// came.
func atDeadline(ctx context.Context, cmds []redis.Cmder) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < time.Millisecond && timedOut(cmds)
}

// timedOut reports whether a command failed with a timeout.
func timedOut(cmds []redis.Cmder) bool {
	for _, cmd := range cmds {
		var t interface{ Timeout() bool }
		if err := cmd.Err(); errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout() {
			return true
		}
	}
	return false
}

// enqueue queues cl and sees that a sender will take it: an idle one woken,
// or a new one when fewer than MaxInFlight run. When MaxInFlight are busy,
// the first to finish takes it, with everything queued meanwhile.
func (c *Client) enqueue(cl *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, cl)
	c.kick()
}

// kick sees that a sender will take the queue: an idle one woken, or a new
// one when fewer than MaxInFlight run. c.mu is held.
func (c *Client) kick() {
	switch {
	case c.idle > 0:
		select {
		case c.wake <- struct{}{}:
		default: // tokens are pending: a sender is waking anyway
		}
	case c.senders < MaxInFlight:
		c.senders++
		go c.send()
	}
}

// take returns the queued calls whose callers still wait, and empties the
// queue.
func (c *Client) take() []*call {
	var batch []*call
	for _, cl := range c.queue {
		// A call whose tracker is sealed stays unsent, as one whose
		// caller left: its caller returns ErrNotSent.
		if cl.ctx.Err() == nil && claim(cl.ctx) {
			cl.taken = true
			batch = append(batch, cl)
		}
	}
	clear(c.queue)
	c.queue = c.queue[:0]
	return batch
}

// send is a sender goroutine: it sends what is queued as one pipeline, over
// and over, and exits after senderIdle with nothing to send, or at once
// when nothing is queued after Close.
func (c *Client) send() {
	// The idle timer is armed once per idle period, not at every pause
	// between pipelines: when it fires early, it is re-armed for the rest.
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	lastWork := time.Now()
	for {
		c.mu.Lock()
		batch := c.take()
		if len(batch) > 0 {
			c.mu.Unlock()
			c.exec(batch)
			lastWork = time.Now()
			continue
		}
		if c.closed {
			c.senders--
			c.mu.Unlock()
			return
		}
		c.idle++
		c.mu.Unlock()
		timedOut := false
		select {
		case <-c.wake:
		case <-c.quit:
		case <-idle.C:
			if rest := senderIdle - time.Since(lastWork); rest > 0 {
				idle.Reset(rest)
			} else {
				timedOut = true
			}
		}
		c.mu.Lock()
		c.idle--
		if timedOut && len(c.queue) == 0 {
			c.senders--
			c.mu.Unlock()
			return
		}
		if timedOut {
			idle.Reset(senderIdle)
		}
		c.mu.Unlock()
	}
}

// exec sends batch as one pipeline and hands every caller its reply.
func (c *Client) exec(batch []*call) {
	ctx, cancel := pipelineContext(batch)
	defer cancel()
	pipe := c.UniversalClient.Pipeline()
	for _, cl := range batch {
		_ = pipe.BatchProcess(ctx, cl.cmds...)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own error
	for _, cl := range batch {
		close(cl.done)
	}
}

// pipelineContext is the context of batch's pipeline: it ends at the
// latest deadline of the callers, and has none when a caller has none.
func pipelineContext(batch []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, cl := range batch {
		d, ok := cl.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}
