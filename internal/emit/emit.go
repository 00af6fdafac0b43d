// Package emit calls the observe hooks for the library's packages: nil-safe,
// one place that classifies results into outcomes and verdicts.
package emit

import (
	"context"
	"errors"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/observe"
)

// AcquireStart reports an acquire that begins and returns the context its
// I/O runs under.
func AcquireStart(h *observe.Hooks, ctx context.Context, e observe.AcquireStart) context.Context {
	if h == nil || h.AcquireStart == nil {
		return ctx
	}
	if out := h.AcquireStart(ctx, e); out != nil {
		return out
	}
	return ctx
}

// AcquireDone reports an acquire that returned. busy is the package's
// not-acquired sentinel (a busy lock is not a failure).
func AcquireDone(h *observe.Hooks, ctx context.Context, e observe.AcquireDone, start time.Time, busy error) {
	if h == nil || h.AcquireDone == nil {
		return
	}
	e.Wait = time.Since(start)
	switch {
	case e.Err == nil:
		e.Outcome = observe.Acquired
	case errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded):
		e.Outcome = observe.Canceled
	case errors.Is(e.Err, busy):
		e.Outcome = observe.Busy
	default:
		e.Outcome = observe.Failed
	}
	h.AcquireDone(ctx, e)
}

// Refreshed reports a refresh.
func Refreshed(h *observe.Hooks, ctx context.Context, e observe.Refreshed) {
	if h != nil && h.Refreshed != nil {
		h.Refreshed(ctx, e)
	}
}

// Lost reports a lease lost.
func Lost(h *observe.Hooks, e observe.Lost) {
	if h != nil && h.Lost != nil {
		h.Lost(e)
	}
}

// Released reports a release.
func Released(h *observe.Hooks, ctx context.Context, e observe.Released) {
	if h != nil && h.Released != nil {
		h.Released(ctx, e)
	}
}

// conflicter is a verifier's refusal (*verifier.StaleError, which this
// package cannot import: verifier imports it): it knows whether it was a
// conflict.
type conflicter interface {
	error
	Conflict() bool
}

// foreigner is a *verifier.ForeignError.
type foreigner interface {
	error
	Foreign() bool
}

// Verified reports a verifier's check of tok that began at start and ended
// with err.
func Verified(h *observe.Hooks, ctx context.Context, verifier, resource string, tok fence.Token, start time.Time, err error) {
	if h == nil || h.Verified == nil {
		return
	}
	e := observe.Verified{Verifier: verifier, Resource: resource, Token: tok, Took: time.Since(start), Err: err}
	var c conflicter
	var f foreigner
	switch {
	case err == nil:
		e.Verdict = observe.Accepted
	case errors.As(err, &f) && f.Foreign():
		e.Verdict = observe.Foreign
	case errors.As(err, &c):
		e.Verdict = observe.Stale
		if c.Conflict() {
			e.Verdict = observe.Conflict
		}
	default:
		e.Verdict = observe.Error
	}
	h.Verified(ctx, e)
}

// Progress is what an acquire reports to the hooks besides its result.
type Progress struct {
	Attempts int
	// Handoff: the last attempt followed a release message.
	Handoff bool
}

// Acquire runs an acquire (run) and reports it: AcquireStart before, with
// the context run gets, and AcquireDone after, with what run noted in p
// (the caller's: run is opaque here, and a Progress it was handed would be
// allocated). busy is the package's not-acquired sentinel. With no hooks
// (or a nil ctx, which run refuses) it only runs run.
func Acquire[L interface{ Token() fence.Token }](h *observe.Hooks, ctx context.Context, e observe.AcquireStart,
	busy error, p *Progress, run func(context.Context) (L, error),
) (L, error) {
	if h == nil || ctx == nil {
		return run(ctx)
	}
	start := time.Now()
	ctx = AcquireStart(h, ctx, e)
	l, err := run(ctx)
	done := observe.AcquireDone{AcquireStart: e, Attempts: p.Attempts, Handoff: p.Handoff && err == nil, Err: err}
	if err == nil {
		done.Token = l.Token()
	}
	AcquireDone(h, ctx, done, start, busy)
	return l, err
}

// Observed runs an acquire of lock name for ttl by a client of kind (run)
// and reports it to h, as Acquire does. waiting tells Acquire from
// TryAcquire; busy is the kind's not-acquired sentinel.
func Observed[L interface{ Token() fence.Token }](h *observe.Hooks, kind observe.Kind, ctx context.Context,
	name string, ttl time.Duration, waiting bool, busy error, p *Progress, run func(context.Context) (L, error),
) (L, error) {
	e := observe.AcquireStart{Kind: kind, Name: name, TTL: ttl, Waiting: waiting}
	return Acquire(h, ctx, e, busy, p, run)
}
