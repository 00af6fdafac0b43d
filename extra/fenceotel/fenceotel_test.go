package fenceotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencelock/fencelock/extra/fenceotel"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

// TestMetricsAndSpans runs a real lease on a throwaway redis-server and a
// memory verifier through the hooks, and reads what the OTel SDK's
// in-memory reader and exporter got.
func TestMetricsAndSpans(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	hooks, err := fenceotel.New(fenceotel.WithMeterProvider(mp), fenceotel.WithTracerProvider(tp))
	require.NoError(t, err)

	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	locks, err := lease.New(rdb, lease.WithHooks(hooks))
	require.NoError(t, err)
	v := &verifier.Memory{Hooks: hooks}
	ctx := t.Context()

	l, err := locks.TryAcquire(ctx, "orders/17", time.Minute)
	require.NoError(t, err)
	_, err = locks.TryAcquire(ctx, "orders/17", time.Minute)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	require.NoError(t, v.Claim(ctx, "orders/17", l.Token()))
	stale := fence.Token{Key: "orders/17", Seq: l.Token().Seq, Holder: "someone-else"}
	require.ErrorIs(t, v.Claim(ctx, "orders/17", stale), verifier.ErrStale)
	require.NoError(t, l.Release(ctx))
	lost, err := locks.TryAcquire(ctx, "orders/18", 20*time.Millisecond)
	require.NoError(t, err)
	<-lost.Done()

	var rm metricdata.ResourceMetrics
	require.Eventually(t, func() bool {
		require.NoError(t, reader.Collect(context.Background(), &rm))
		return sum(rm, "fencelock.lease.lost", nil) == 1 &&
			histCount(rm, "fencelock.lease.held", attribute.String("fencelock.lease.end", "lost")) == 1
	}, 5*time.Second, 10*time.Millisecond, "the loss is counted (it is reported from a goroutine of its own)")

	assert.Equal(t, uint64(1), histCount(rm, "fencelock.acquire.duration", attribute.String("fencelock.acquire.outcome", "busy")))
	assert.Equal(t, uint64(2), histCount(rm, "fencelock.acquire.duration", attribute.String("fencelock.acquire.outcome", "acquired")))
	assert.Equal(t, uint64(1), histCount(rm, "fencelock.lease.held", attribute.String("fencelock.lease.end", "released")))
	assert.Equal(t, uint64(1), histCount(rm, "fencelock.lease.held", attribute.String("fencelock.lease.end", "lost")))
	assert.Equal(t, int64(1), sum(rm, "fencelock.verifier.checks", ptr(attribute.String("fencelock.verifier.verdict", "accepted"))))
	assert.Equal(t, int64(1), sum(rm, "fencelock.verifier.checks", ptr(attribute.String("fencelock.verifier.verdict", "conflict"))))

	names := map[string]int{}
	for _, s := range spans.GetSpans() {
		names[s.Name]++
		if s.Name == "fencelock.acquire" {
			assert.Contains(t, s.Attributes, attribute.String("fencelock.lock.kind", "lease"))
		}
	}
	assert.Equal(t, map[string]int{"fencelock.acquire": 3, "fencelock.release": 1, "fencelock.verify": 2}, names)
}

func TestNewRejectsNil(t *testing.T) {
	_, err := fenceotel.New(nil)
	assert.ErrorIs(t, err, fenceotel.ErrInvalid)
	_, err = fenceotel.New(fenceotel.WithMeterProvider(nil))
	assert.ErrorIs(t, err, fenceotel.ErrInvalid)
	_, err = fenceotel.New(fenceotel.WithTracerProvider(nil))
	assert.ErrorIs(t, err, fenceotel.ErrInvalid)
}

func ptr(kv attribute.KeyValue) *attribute.KeyValue { return &kv }

// sum returns the value of counter name, for the points with attribute
// kv (all points when kv is nil).
func sum(rm metricdata.ResourceMetrics, name string, kv *attribute.KeyValue) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range s.DataPoints {
					if kv == nil || has(p.Attributes, *kv) {
						n += p.Value
					}
				}
			}
		}
	}
	return n
}

// histCount returns how many values histogram name recorded with kv.
func histCount(rm metricdata.ResourceMetrics, name string, kv attribute.KeyValue) uint64 {
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, p := range h.DataPoints {
					if has(p.Attributes, kv) {
						n += p.Count
					}
				}
			}
		}
	}
	return n
}

func has(set attribute.Set, kv attribute.KeyValue) bool {
	v, ok := set.Value(kv.Key)
	return ok && v == kv.Value
}
