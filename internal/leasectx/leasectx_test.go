package leasectx_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fencelock/fencelock/internal/leasectx"
)

func TestBound(t *testing.T) {
	bg := context.Background()
	_, ok := leasectx.Bound(bg)
	assert.False(t, ok, "no deadline, no lease")
	_, ok = leasectx.Bound(leasectx.With(bg, func() time.Time { return time.Time{} }))
	assert.False(t, ok, "a lease without a deadline yet")

	soon, later := time.Now().Add(time.Second), time.Now().Add(time.Hour)
	lease := func(d time.Time) context.Context { return leasectx.With(bg, func() time.Time { return d }) }
	b, ok := leasectx.Bound(lease(soon))
	assert.True(t, ok)
	assert.InDelta(t, time.Second, b, float64(500*time.Millisecond), "the lease's deadline")

	ctx, cancel := context.WithDeadline(lease(later), soon)
	defer cancel()
	b, ok = leasectx.Bound(ctx)
	assert.True(t, ok)
	assert.LessOrEqual(t, b, time.Second, "the context's deadline, earlier than the lease's")

	ctx, cancel = context.WithDeadline(lease(soon), later)
	defer cancel()
	b, _ = leasectx.Bound(ctx)
	assert.LessOrEqual(t, b, time.Second, "the lease's deadline, earlier than the context's")

	b, ok = leasectx.Bound(lease(time.Now().Add(-time.Second)))
	assert.True(t, ok)
	assert.Equal(t, time.Millisecond, b, "a deadline passed: the least bound, never none")
}
