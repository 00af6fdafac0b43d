package transport

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Transport sends the script calls of one client (one node of a quorum)
// to its Redis, batching the calls that goroutines make at the same time
// into pipelines: go-redis sends one command per round trip, so a thousand
// concurrent tries would queue for the connection pool, one round trip
// each; batched, a burst costs a few round trips.
//
// A lone call (nothing queued or in flight) goes out directly on its
// caller's goroutine, as go-redis would send it. Otherwise it is queued,
// and a sender goroutine (at most maxInFlight pipelines at a time, a direct
// call counting as one) takes everything queued and sends it as one
// pipeline through the caller's own client, rdb.Pipelined, so its hooks
// and any wrapper type see it. Every caller returns at its own context:
// a call still queued then is removed and surely not sent; one already
// taken into a pipeline may have run. A pipeline runs under a context that
// ends at the latest deadline of its callers, so a frozen server holds a
// sender no longer than its callers wait (with no deadline among them it
// has none, and the client's ReadTimeout bounds it, as a direct call's).
//
// Senders exit after senderIdle with nothing to send, and at once after
// Close, which waits for them; calls made after Close go out directly.
type Transport struct {
	rdb   redis.UniversalClient
	batch bool

	mu      sync.Mutex
	queue   []*call
	senders int           // pipelines or direct calls in flight, and idle senders
	idle    int           // of them, senders waiting for work
	wake    chan struct{} // a token per idle sender to wake
	quit    chan struct{} // closed by Close
	closed  bool
	running sync.WaitGroup             // sender goroutines
	flying  map[chan struct{}]struct{} // a channel per pipeline in flight, closed when it ends

	conns sync.Pool // *conn, reused by SendClaimed: one fewer allocation a call
}

// maxInFlight is how many pipelines (or direct calls) one Transport has in
// flight at most, each on one connection of the client's pool. Two
// measured better than four in a burst of a thousand Redlock waiters
// (larger pipelines, fewer write syscalls).
const maxInFlight = 2

// senderIdle is how long a sender with nothing to send waits for more
// before it exits: one that outlives a pipeline keeps the stack go-redis's
// deep call path grew, instead of growing a new one per pipeline.
const senderIdle = 500 * time.Millisecond

// NewTransport returns the transport of rdb. With batch false every call
// goes out directly, one round trip each. It does no I/O and starts no
// goroutine.
func NewTransport(rdb redis.UniversalClient, batch bool) *Transport {
	return &Transport{rdb: rdb, batch: batch, wake: make(chan struct{}, maxInFlight), quit: make(chan struct{})}
}

// Close stops the senders and waits for them, until ctx ends: a sender
// busy with a pipeline exits when the pipeline does, by its callers'
// latest deadline. Calls made afterwards go out directly. Closing twice
// is fine.
func (t *Transport) Close(ctx context.Context) error {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.quit)
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Senders returns the sender goroutines running (busy or idle) and the
// direct calls in flight.
func (t *Transport) Senders() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.senders
}

// call is one queued call: its commands go out together, in order. The
// sender processes them, then closes done; the caller reads them only
// after done is closed, so a caller that left shares nothing with the
// sender.
type call struct {
	ctx   context.Context
	cmds  []redis.Cmder
	done  chan struct{}
	claim func() bool // nil, or whether it may still go out (see SendClaimed)
	taken bool        // a sender took it into a pipeline; guarded by Transport.mu
}

// direct reports whether a call goes out directly, on its caller's
// goroutine: batching is off, the transport is closed, or nothing else is
// queued or in flight. In the last case (counted) the call counts as in
// flight until undirect, so the calls made meanwhile are batched.
func (t *Transport) direct() (direct, counted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.batch || t.closed {
		return true, false
	}
	if len(t.queue) > 0 || t.senders > t.idle {
		return false, false
	}
	t.senders++
	return true, true
}

// undirect ends a counted direct call, and kicks a sender for the calls
// queued behind it alone.
func (t *Transport) undirect() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.senders--
	if len(t.queue) > 0 && t.senders == t.idle {
		t.kick()
	}
}

// wait queues cmds as one call and waits for their replies or ctx. With a
// nil error the replies are in cmds, and Sent says what the server did.
// When ctx ends first it returns ctx's error: NotSent if the call was
// still queued (it is removed and never goes out), MayHaveRun if a
// pipeline had taken it. A call its claim refused when a sender came to it
// is dropped: NotSent, errDropped.
func (t *Transport) wait(ctx context.Context, cmds []redis.Cmder, claim func() bool) (Sent, error) {
	if err := ctx.Err(); err != nil {
		return NotSent, errors.Join(err, errSkipped)
	}
	cl := &call{ctx: ctx, cmds: cmds, claim: claim, done: make(chan struct{})}
	t.mu.Lock()
	t.queue = append(t.queue, cl)
	t.kick()
	t.mu.Unlock()
	select {
	case <-cl.done:
	case <-ctx.Done():
	}
	t.mu.Lock()
	taken := cl.taken
	if !taken {
		t.queue = slices.DeleteFunc(t.queue, func(q *call) bool { return q == cl })
	}
	t.mu.Unlock()
	if !taken { // left while queued, or dropped by its claim
		if err := ctx.Err(); err != nil {
			return NotSent, errors.Join(err, errSkipped)
		}
		return NotSent, errDropped
	}
	select {
	case <-cl.done:
	default:
		return MayHaveRun, ctx.Err() // left while its pipeline runs
	}
	sent := replied(cmds)
	if sent != MayHaveRun || !atDeadline(ctx) {
		return sent, nil
	}
	// The pipeline ran out of time at this caller's deadline, the latest
	// of its callers', a moment before the caller's context did: the
	// caller returns its context's error, as the others.
	<-ctx.Done()
	return MayHaveRun, ctx.Err()
}

// atDeadline reports whether ctx's deadline is at most a millisecond
// away: a socket timeout set to it fires a moment before ctx ends.
func atDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < time.Millisecond
}

// replied is what commands that got their replies did: the rule of SentOf
// applied to the first error among them.
func replied(cmds []redis.Cmder) Sent {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return SentOf(err)
		}
	}
	return Ran
}

// kick sees that a sender will take the queue: an idle one woken, or a new
// one while fewer than maxInFlight are in flight. t.mu is held.
func (t *Transport) kick() {
	switch {
	case t.idle > 0:
		select {
		case t.wake <- struct{}{}:
		default: // a token is pending: a sender is waking anyway
		}
	case t.senders < maxInFlight:
		t.senders++
		t.running.Add(1)
		go t.send()
	}
}

// take returns the queued calls whose callers still wait, marked taken,
// and empties the queue. t.mu is held.
func (t *Transport) take() []*call {
	var batch []*call
	for _, cl := range t.queue {
		if cl.ctx.Err() == nil && (cl.claim == nil || cl.claim()) {
			cl.taken = true
			batch = append(batch, cl)
		} else {
			close(cl.done) // dropped: its caller learns so at once
		}
	}
	clear(t.queue)
	t.queue = t.queue[:0]
	return batch
}

// send is a sender goroutine: it sends what is queued as one pipeline,
// over and over, and exits after senderIdle with nothing to send, or as
// soon as nothing is queued after Close.
func (t *Transport) send() {
	defer t.running.Done()
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		t.mu.Lock()
		if batch := t.take(); len(batch) > 0 {
			flying := make(chan struct{})
			if t.flying == nil {
				t.flying = make(map[chan struct{}]struct{})
			}
			t.flying[flying] = struct{}{}
			t.mu.Unlock()
			t.exec(batch, flying)
			idle.Reset(senderIdle)
			continue
		}
		if t.closed {
			t.senders--
			t.mu.Unlock()
			return
		}
		t.idle++
		t.mu.Unlock()
		timedOut := false
		select {
		case <-t.wake:
		case <-t.quit:
		case <-idle.C:
			timedOut = true
		}
		t.mu.Lock()
		t.idle--
		if timedOut && len(t.queue) == 0 {
			t.senders--
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		if timedOut {
			idle.Reset(senderIdle)
		}
	}
}

// Settle waits until the pipelines in flight now have ended, or ctx has
// (then it returns ctx.Err()). A call that undoes one whose caller left it
// in flight (MayHaveRun) settles first: a sender may not even have written
// the lost call yet, and the undo, sent on another connection, would
// overtake it and find nothing to undo.
func (t *Transport) Settle(ctx context.Context) error {
	t.mu.Lock()
	var wait []chan struct{}
	for ch := range t.flying {
		wait = append(wait, ch)
	}
	t.mu.Unlock()
	for _, ch := range wait {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// exec sends batch as one pipeline through the caller's client and hands
// every caller its replies. take marked batch taken under t.mu, and exec is
// counted in flight under the same hold (see send).
func (t *Transport) exec(batch []*call, flying chan struct{}) {
	defer func() {
		t.mu.Lock()
		delete(t.flying, flying)
		t.mu.Unlock()
		close(flying)
	}()
	ctx, cancel := pipelineContext(batch)
	defer cancel()
	_, _ = t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, cl := range batch {
			for _, cmd := range cl.cmds {
				_ = p.Process(ctx, cmd) // queues it; every command carries its own error
			}
		}
		return nil
	})
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
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// record returns the commands fn queues on a pipeline of the caller's
// client, which is only used to build them.
func (t *Transport) record(fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	p := t.rdb.Pipeline()
	err := fn(p)
	cmds := slices.Clone(p.Cmds())
	p.Discard()
	return cmds, err
}
