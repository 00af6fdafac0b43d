package emit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/observe"
)

var (
	errBusy = errors.New("test: busy")
	errBoom = errors.New("test: boom")
	tok     = fence.Token{Key: "jobs/a", Seq: 42, Holder: "h1"}
)

type ctxKey struct{}

// rec records every event with the context value it was called with.
type rec struct {
	mu       sync.Mutex
	started  []observe.AcquireStart
	done     []observe.AcquireDone
	doneCtx  []any
	refresh  []observe.Refreshed
	lost     []observe.Lost
	released []observe.Released
	verified []observe.Verified
	ctxs     []any
}

// hooks returns recording hooks; AcquireStart returns a context carrying
// "span" (or nil when nilCtx).
func (r *rec) hooks(nilCtx bool) *observe.Hooks {
	return &observe.Hooks{
		AcquireStart: func(ctx context.Context, e observe.AcquireStart) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.started = append(r.started, e)
			if nilCtx {
				return nil
			}
			return context.WithValue(ctx, ctxKey{}, "span")
		},
		AcquireDone: func(ctx context.Context, e observe.AcquireDone) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.done = append(r.done, e)
			r.doneCtx = append(r.doneCtx, ctx.Value(ctxKey{}))
		},
		Refreshed: func(ctx context.Context, e observe.Refreshed) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.refresh = append(r.refresh, e)
			r.ctxs = append(r.ctxs, ctx.Value(ctxKey{}))
		},
		Lost: func(e observe.Lost) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.lost = append(r.lost, e)
		},
		Released: func(ctx context.Context, e observe.Released) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.released = append(r.released, e)
			r.ctxs = append(r.ctxs, ctx.Value(ctxKey{}))
		},
		Verified: func(ctx context.Context, e observe.Verified) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.verified = append(r.verified, e)
			r.ctxs = append(r.ctxs, ctx.Value(ctxKey{}))
		},
	}
}

// callAll calls every reporting function once with h.
func callAll(h *observe.Hooks, ctx context.Context) context.Context {
	out := emit.AcquireStart(h, ctx, observe.AcquireStart{Kind: observe.KindLease, Name: "a"})
	emit.AcquireDone(h, ctx, observe.AcquireDone{}, time.Now(), errBusy)
	emit.Refreshed(h, ctx, observe.Refreshed{})
	emit.Lost(h, observe.Lost{})
	emit.Released(h, ctx, observe.Released{})
	emit.Verified(h, ctx, "memory", "r", tok, time.Now(), errBoom)
	return out
}

func TestNilHooks(t *testing.T) {
	ctx := context.WithValue(t.Context(), ctxKey{}, "caller")
	for name, h := range map[string]*observe.Hooks{"nil hooks": nil, "nil fields": {}} {
		t.Run(name, func(t *testing.T) {
			var out context.Context
			require.NotPanics(t, func() { out = callAll(h, ctx) })
			assert.Equal(t, ctx, out, "AcquireStart returns ctx itself")
		})
	}
}

func TestEachHookAlone(t *testing.T) {
	// A Hooks value with only one field set: the others are skipped, that
	// one is called.
	full := (&rec{}).hooks(false)
	for _, only := range []string{"AcquireStart", "AcquireDone", "Refreshed", "Lost", "Released", "Verified"} {
		t.Run(only, func(t *testing.T) {
			var h observe.Hooks
			called := 0
			switch only {
			case "AcquireStart":
				h.AcquireStart = func(ctx context.Context, e observe.AcquireStart) context.Context {
					called++
					return full.AcquireStart(ctx, e)
				}
			case "AcquireDone":
				h.AcquireDone = func(ctx context.Context, e observe.AcquireDone) { called++ }
			case "Refreshed":
				h.Refreshed = func(ctx context.Context, e observe.Refreshed) { called++ }
			case "Lost":
				h.Lost = func(e observe.Lost) { called++ }
			case "Released":
				h.Released = func(ctx context.Context, e observe.Released) { called++ }
			case "Verified":
				h.Verified = func(ctx context.Context, e observe.Verified) { called++ }
			}
			require.NotPanics(t, func() { callAll(&h, t.Context()) })
			assert.Equal(t, 1, called)
		})
	}
}

func TestAcquireStart(t *testing.T) {
	var r rec
	ctx := t.Context()
	e := observe.AcquireStart{Kind: observe.KindRedlock, Name: "jobs/a", TTL: time.Minute, Waiting: true}
	out := emit.AcquireStart(r.hooks(false), ctx, e)
	assert.Equal(t, "span", out.Value(ctxKey{}), "the hook's context is returned")
	require.Len(t, r.started, 1)
	assert.Equal(t, e, r.started[0])

	out = emit.AcquireStart(r.hooks(true), ctx, e)
	assert.Equal(t, ctx, out, "a hook that returns nil leaves ctx")
}

func TestAcquireDoneOutcomes(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		busy error
		want observe.Outcome
	}{
		{"acquired", nil, errBusy, observe.Acquired},
		{"canceled", context.Canceled, errBusy, observe.Canceled},
		{"deadline", context.DeadlineExceeded, errBusy, observe.Canceled},
		{"wrapped canceled", fmt.Errorf("acquire: %w", context.Canceled), errBusy, observe.Canceled},
		{"busy and deadline", errors.Join(errBusy, context.DeadlineExceeded), errBusy, observe.Canceled},
		{"busy", fmt.Errorf("held: %w", errBusy), errBusy, observe.Busy},
		{"failed", errBoom, errBusy, observe.Failed},
		{"nil busy sentinel", errBoom, nil, observe.Failed},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r rec
			ctx := context.WithValue(t.Context(), ctxKey{}, "ctx")
			e := observe.AcquireDone{
				AcquireStart: observe.AcquireStart{Kind: observe.KindLease, Name: "jobs/a", TTL: time.Second, Waiting: true},
				Token:        tok, Attempts: 3, Handoff: true, Err: c.err,
				Outcome: "preset", Wait: -1,
			}
			emit.AcquireDone(r.hooks(false), ctx, e, time.Now().Add(-time.Second), c.busy)
			require.Len(t, r.done, 1)
			got := r.done[0]
			assert.Equal(t, c.want, got.Outcome)
			assert.GreaterOrEqual(t, got.Wait, time.Second, "Wait is the time since start")
			assert.Less(t, got.Wait, time.Hour)
			assert.Equal(t, "ctx", r.doneCtx[0])
			// Everything else is passed through.
			got.Outcome, got.Wait = e.Outcome, e.Wait
			assert.Equal(t, e, got)
		})
	}
}

func TestRefreshedLostReleased(t *testing.T) {
	var r rec
	h := r.hooks(false)
	ctx := context.WithValue(t.Context(), ctxKey{}, "ctx")
	rf := observe.Refreshed{Kind: observe.KindLease, Token: tok, TTL: time.Minute, Took: time.Millisecond, KeepAlive: true, Err: errBoom}
	lo := observe.Lost{Kind: observe.KindRedlock, Token: tok, Held: time.Hour, Err: errBoom}
	re := observe.Released{Kind: observe.KindLease, Token: tok, Held: time.Minute, Took: 2 * time.Millisecond, Err: errBoom}
	emit.Refreshed(h, ctx, rf)
	emit.Lost(h, lo)
	emit.Released(h, ctx, re)
	assert.Equal(t, []observe.Refreshed{rf}, r.refresh)
	assert.Equal(t, []observe.Lost{lo}, r.lost)
	assert.Equal(t, []observe.Released{re}, r.released)
	assert.Equal(t, []any{"ctx", "ctx"}, r.ctxs, "the caller's context")
}

// staleErr stands in for *verifier.StaleError.
type staleErr struct{ conflict bool }

func (e *staleErr) Error() string  { return "stale" }
func (e *staleErr) Conflict() bool { return e.conflict }

// foreignErr stands in for *verifier.ForeignError.
type foreignErr struct{ foreign bool }

func (e *foreignErr) Error() string { return "foreign" }
func (e *foreignErr) Foreign() bool { return e.foreign }

// both has both methods.
type both struct{ foreign, conflict bool }

func (e *both) Error() string  { return "both" }
func (e *both) Foreign() bool  { return e.foreign }
func (e *both) Conflict() bool { return e.conflict }

func TestVerifiedVerdicts(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want observe.Verdict
	}{
		{"accepted", nil, observe.Accepted},
		{"stale", &staleErr{}, observe.Stale},
		{"conflict", &staleErr{conflict: true}, observe.Conflict},
		{"wrapped stale", fmt.Errorf("claim: %w", &staleErr{}), observe.Stale},
		{"wrapped conflict", fmt.Errorf("claim: %w", &staleErr{conflict: true}), observe.Conflict},
		{"joined conflict", errors.Join(errBoom, &staleErr{conflict: true}), observe.Conflict},
		{"foreign", &foreignErr{foreign: true}, observe.Foreign},
		{"wrapped foreign", fmt.Errorf("claim: %w", &foreignErr{foreign: true}), observe.Foreign},
		{"not foreign", &foreignErr{}, observe.Error},
		{"foreign before stale", &both{foreign: true, conflict: true}, observe.Foreign},
		{"not foreign but conflict", &both{conflict: true}, observe.Conflict},
		{"plain error", errBoom, observe.Error},
		{"canceled", context.Canceled, observe.Error},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r rec
			ctx := context.WithValue(t.Context(), ctxKey{}, "ctx")
			emit.Verified(r.hooks(false), ctx, "postgres", "res", tok, time.Now().Add(-time.Second), c.err)
			require.Len(t, r.verified, 1)
			got := r.verified[0]
			assert.Equal(t, c.want, got.Verdict)
			assert.Equal(t, "postgres", got.Verifier)
			assert.Equal(t, "res", got.Resource)
			assert.Equal(t, tok, got.Token)
			assert.Equal(t, c.err, got.Err)
			assert.GreaterOrEqual(t, got.Took, time.Second)
			assert.Equal(t, []any{"ctx"}, r.ctxs)
		})
	}
}

// leaseT is what Acquire returns; its Token fails the test when called on
// a failed acquire (the lease may be nil then).
type leaseT struct {
	t   *testing.T
	tok fence.Token
	bad bool
}

func (l *leaseT) Token() fence.Token {
	if l == nil || l.bad {
		l.t.Error("Token called on a failed acquire")
		return fence.Token{}
	}
	return l.tok
}

func TestAcquireReports(t *testing.T) {
	var r rec
	start := observe.AcquireStart{Kind: observe.KindLease, Name: "jobs/a", TTL: time.Minute, Waiting: true}
	ctx := context.WithValue(t.Context(), ctxKey{}, "caller")
	var runCtx context.Context
	var p emit.Progress
	l, err := emit.Acquire(r.hooks(false), ctx, start, errBusy, &p, func(ctx context.Context) (*leaseT, error) {
		runCtx = ctx
		require.Len(t, r.started, 1, "AcquireStart before run")
		assert.Empty(t, r.done)
		p.Attempts = 4
		p.Handoff = true
		time.Sleep(5 * time.Millisecond)
		return &leaseT{t: t, tok: tok}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, tok, l.tok)
	assert.Equal(t, "span", runCtx.Value(ctxKey{}), "run gets AcquireStart's context")
	require.Len(t, r.done, 1)
	d := r.done[0]
	assert.Equal(t, "span", r.doneCtx[0], "so does AcquireDone")
	assert.Equal(t, start, d.AcquireStart)
	assert.Equal(t, observe.Acquired, d.Outcome)
	assert.Equal(t, tok, d.Token)
	assert.Equal(t, 4, d.Attempts)
	assert.True(t, d.Handoff)
	assert.NoError(t, d.Err)
	assert.GreaterOrEqual(t, d.Wait, 5*time.Millisecond)
}

func TestAcquireFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		l    *leaseT
		want observe.Outcome
	}{
		{"busy", fmt.Errorf("held: %w", errBusy), nil, observe.Busy},
		{"canceled", context.DeadlineExceeded, nil, observe.Canceled},
		{"failed with a value", errBoom, &leaseT{bad: true}, observe.Failed},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r rec
			if c.l != nil {
				c.l.t = t
			}
			var p emit.Progress
			_, err := emit.Acquire(r.hooks(false), t.Context(), observe.AcquireStart{Name: "a"}, errBusy, &p,
				func(_ context.Context) (*leaseT, error) {
					p.Attempts = 2
					p.Handoff = true
					return c.l, c.err
				})
			assert.Equal(t, c.err, err, "run's error is returned unchanged")
			require.Len(t, r.done, 1)
			d := r.done[0]
			assert.Equal(t, c.want, d.Outcome)
			assert.Zero(t, d.Token, "no token unless acquired")
			assert.False(t, d.Handoff, "a handoff only counts on success")
			assert.Equal(t, 2, d.Attempts)
			assert.Equal(t, c.err, d.Err)
		})
	}
}

func TestAcquireWithoutHooksOrCtx(t *testing.T) {
	var r rec
	ctx := context.WithValue(t.Context(), ctxKey{}, "caller")
	for name, c := range map[string]struct {
		h   *observe.Hooks
		ctx context.Context
	}{
		"nil hooks":  {nil, ctx},
		"nil ctx":    {r.hooks(false), nil},
		"nil fields": {&observe.Hooks{}, ctx},
	} {
		t.Run(name, func(t *testing.T) {
			ran := 0
			var p emit.Progress
			l, err := emit.Acquire(c.h, c.ctx, observe.AcquireStart{Name: "a"}, errBusy, &p,
				func(got context.Context) (*leaseT, error) {
					ran++
					assert.Equal(t, c.ctx, got, "run gets the caller's ctx")
					return &leaseT{t: t, tok: tok}, errBoom
				})
			assert.Equal(t, 1, ran)
			assert.ErrorIs(t, err, errBoom)
			assert.Equal(t, tok, l.tok, "run's value is returned as is")
		})
	}
	assert.Empty(t, r.started, "a nil ctx reports nothing")
	assert.Empty(t, r.done)
}
