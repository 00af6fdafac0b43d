// Package fenceotel turns fencelock's events (package observe) into
// OpenTelemetry metrics and spans.
//
//	hooks, err := fenceotel.New() // the global MeterProvider and TracerProvider
//	locks, err := lease.New(rdb, lease.WithHooks(hooks))
//	v, err := pgverifier.New(pool, pgverifier.WithHooks(hooks))
//
// It is a module of its own, as go-redis's extra/redisotel is, so that the
// fencelock core depends on no telemetry library.
//
// Metrics (instrumentation scope "github.com/fencelock/fencelock"):
//
//	fencelock.acquire.duration   histogram, s   how long TryAcquire/Acquire took (the wait for a lock);
//	                                            attributes fencelock.lock.kind (lease, redlock),
//	                                            fencelock.acquire.outcome (acquired, busy, canceled, failed),
//	                                            fencelock.acquire.waiting
//	fencelock.lease.held         histogram, s   how long leases lasted, from acquire to release or loss;
//	                                            attributes fencelock.lock.kind, fencelock.lease.end (released, lost)
//	fencelock.lease.lost         counter        leases lost (deadline passed, lock gone); fencelock.lock.kind
//	fencelock.lease.handoffs     counter        acquires that got the lock right after a release woke them
//	fencelock.refresh.failures   counter        refreshes that failed (the lease may still be held);
//	                                            fencelock.lock.kind, fencelock.refresh.keepalive
//	fencelock.verifier.checks    counter        tokens checked by a verifier; attributes
//	                                            fencelock.verifier (memory, postgres, mysql, redis),
//	                                            fencelock.verifier.verdict (accepted, stale, conflict, foreign, error)
//
// The verifier "postgres" is pgverifier and sqlverifier's PostgreSQL dialect
// alike (one guard, one name); "mysql" is sqlverifier on MySQL or MariaDB.
//
// Lock names and resources are not metric attributes: a service that locks
// per order id would make one time series per order. They are attributes
// of the spans: fencelock.acquire (from the start of an acquire to its end;
// the acquire's Redis calls run under it; also fencelock.acquire.attempts),
// fencelock.release and fencelock.verify, with fencelock.lock.name,
// fencelock.token.seq, fencelock.resource, and the error status on failures.
package fenceotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/observe"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/fencelock/fencelock"

// ErrInvalid is returned by New for a nil provider or option.
var ErrInvalid = errors.New("fenceotel: invalid argument")

// Option configures New.
type Option func(*config) error

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the MeterProvider. The default is
// otel.GetMeterProvider() at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return errors.Join(ErrInvalid, errors.New("nil MeterProvider"))
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider sets the TracerProvider. The default is
// otel.GetTracerProvider() at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.Join(ErrInvalid, errors.New("nil TracerProvider"))
		}
		c.tp = tp
		return nil
	}
}

// Metric names.
const (
	MetricAcquireDuration = "fencelock.acquire.duration"
	MetricLeaseHeld       = "fencelock.lease.held"
	MetricLeaseLost       = "fencelock.lease.lost"
	MetricHandoffs        = "fencelock.lease.handoffs"
	MetricRefreshFailures = "fencelock.refresh.failures"
	MetricVerifierChecks  = "fencelock.verifier.checks"
)

// Span names.
const (
	SpanAcquire = "fencelock.acquire"
	SpanRelease = "fencelock.release"
	SpanVerify  = "fencelock.verify"
)

// Values of AttrEnd: how a lease ended.
const (
	EndReleased = "released"
	EndLost     = "lost"
)

// Attribute keys.
const (
	AttrAttempts  = attribute.Key("fencelock.acquire.attempts") // spans only
	AttrKind      = attribute.Key("fencelock.lock.kind")
	AttrOutcome   = attribute.Key("fencelock.acquire.outcome")
	AttrWaiting   = attribute.Key("fencelock.acquire.waiting")
	AttrEnd       = attribute.Key("fencelock.lease.end")
	AttrKeepAlive = attribute.Key("fencelock.refresh.keepalive")
	AttrVerifier  = attribute.Key("fencelock.verifier")
	AttrVerdict   = attribute.Key("fencelock.verifier.verdict")
	AttrName      = attribute.Key("fencelock.lock.name")
	AttrSeq       = attribute.Key("fencelock.token.seq")
	AttrResource  = attribute.Key("fencelock.resource")
)

type instruments struct {
	tracer       trace.Tracer
	acquire      metric.Float64Histogram
	held         metric.Float64Histogram
	lost         metric.Int64Counter
	handoffs     metric.Int64Counter
	refreshFails metric.Int64Counter
	checks       metric.Int64Counter
}

// New returns hooks that record fencelock's events as metrics and spans.
// Pass them to lease.WithHooks (for either lease kind), pgverifier.WithHooks,
// sqlverifier.WithHooks, redisverifier.WithHooks or verifier.Memory's Hooks
// field; one value may serve them all.
func New(opts ...Option) (*observe.Hooks, error) {
	c := config{}
	for _, o := range opts {
		if o == nil {
			return nil, errors.Join(ErrInvalid, errors.New("nil option"))
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	m := c.mp.Meter(ScopeName)
	in := &instruments{tracer: c.tp.Tracer(ScopeName)}
	var err, e error
	in.acquire, e = m.Float64Histogram(MetricAcquireDuration, metric.WithUnit("s"),
		metric.WithDescription("How long TryAcquire and Acquire took, waiting for the lock included."))
	err = errors.Join(err, e)
	in.held, e = m.Float64Histogram(MetricLeaseHeld, metric.WithUnit("s"),
		metric.WithDescription("How long leases lasted, from the start of the acquire to the release or the loss."))
	err = errors.Join(err, e)
	in.lost, e = m.Int64Counter(MetricLeaseLost, metric.WithUnit("{lease}"),
		metric.WithDescription("Leases lost: the local deadline passed or a refresh found the lock gone."))
	err = errors.Join(err, e)
	in.handoffs, e = m.Int64Counter(MetricHandoffs, metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquires that got the lock right after a release woke them."))
	err = errors.Join(err, e)
	in.refreshFails, e = m.Int64Counter(MetricRefreshFailures, metric.WithUnit("{refresh}"),
		metric.WithDescription("Refreshes that failed; the lease may still be held until its deadline."))
	err = errors.Join(err, e)
	in.checks, e = m.Int64Counter(MetricVerifierChecks, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens checked by a verifier, by verdict: accepted, stale, conflict, foreign, error."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return &observe.Hooks{
		AcquireStart: in.acquireStart,
		AcquireDone:  in.acquireDone,
		Refreshed:    in.refreshed,
		Lost:         in.leaseLost,
		Released:     in.released,
		Verified:     in.verified,
	}, nil
}

func (in *instruments) acquireStart(ctx context.Context, e observe.AcquireStart) context.Context {
	ctx, _ = in.tracer.Start(ctx, SpanAcquire, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrKind.String(string(e.Kind)), AttrName.String(e.Name), AttrWaiting.Bool(e.Waiting)))
	return ctx
}

func (in *instruments) acquireDone(ctx context.Context, e observe.AcquireDone) {
	attrs := metric.WithAttributes(AttrKind.String(string(e.Kind)), AttrOutcome.String(string(e.Outcome)),
		AttrWaiting.Bool(e.Waiting))
	in.acquire.Record(ctx, e.Wait.Seconds(), attrs)
	if e.Handoff {
		in.handoffs.Add(ctx, 1, metric.WithAttributes(AttrKind.String(string(e.Kind))))
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(AttrOutcome.String(string(e.Outcome)), AttrAttempts.Int(e.Attempts))
	if e.Outcome == observe.Acquired {
		span.SetAttributes(AttrSeq.Int64(int64(e.Token.Seq)))
	}
	if e.Outcome == observe.Failed {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End()
}

func (in *instruments) refreshed(ctx context.Context, e observe.Refreshed) {
	if e.Err != nil {
		in.refreshFails.Add(ctx, 1, metric.WithAttributes(AttrKind.String(string(e.Kind)), AttrKeepAlive.Bool(e.KeepAlive)))
	}
}

func (in *instruments) leaseLost(e observe.Lost) {
	ctx := context.Background()
	kind := AttrKind.String(string(e.Kind))
	in.held.Record(ctx, e.Held.Seconds(), metric.WithAttributes(kind, AttrEnd.String(EndLost)))
	in.lost.Add(ctx, 1, metric.WithAttributes(kind))
}

func (in *instruments) released(ctx context.Context, e observe.Released) {
	kind := AttrKind.String(string(e.Kind))
	in.held.Record(ctx, e.Held.Seconds(), metric.WithAttributes(kind, AttrEnd.String(EndReleased)))
	in.span(ctx, SpanRelease, e.Took, e.Err, kind, AttrName.String(e.Token.Key), AttrSeq.Int64(int64(e.Token.Seq)))
}

func (in *instruments) verified(ctx context.Context, e observe.Verified) {
	in.checks.Add(ctx, 1, metric.WithAttributes(AttrVerifier.String(e.Verifier), AttrVerdict.String(string(e.Verdict))))
	var err error
	if e.Verdict == observe.Error {
		err = e.Err
	}
	in.span(ctx, SpanVerify, e.Took, err, AttrVerifier.String(e.Verifier), AttrVerdict.String(string(e.Verdict)),
		AttrResource.String(e.Resource), AttrName.String(e.Token.Key), AttrSeq.Int64(int64(e.Token.Seq)))
}

// span records a finished call of duration took, ending now, as a span.
func (in *instruments) span(ctx context.Context, name string, took time.Duration, err error, attrs ...attribute.KeyValue) {
	end := time.Now()
	_, span := in.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-took)), trace.WithAttributes(attrs...))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}
