// Package leasectx lets a lease's context tell its local deadline to the
// storage: a lease (or a set of leases) puts it in the context it hands
// out, and a verifier that begins a guarded transaction with that context,
// or one derived from it, reads what is left of the lease and has the
// database end the transaction then (see pgverifier and sqlverifier).
//
// The deadline is a function, read when asked, because a refresh moves it;
// a context's own Deadline must not change, so it cannot carry it.
package leasectx

import (
	"context"
	"time"
)

type key struct{}

// With returns ctx carrying deadline, the function that tells the local
// deadline of the lease ctx belongs to.
func With(ctx context.Context, deadline func() time.Time) context.Context {
	return context.WithValue(ctx, key{}, deadline)
}

// Deadline returns the local deadline of the lease ctx belongs to, and
// false when it carries none (or its function returns the zero time).
func Deadline(ctx context.Context) (time.Time, bool) {
	f, ok := ctx.Value(key{}).(func() time.Time)
	if !ok || f == nil {
		return time.Time{}, false
	}
	d := f()
	return d, !d.IsZero()
}

// Bound returns how long a transaction begun now may last: the time left
// until the earlier of ctx's deadline and the deadline of the lease ctx
// belongs to, never below 1 ms; false when ctx has neither.
func Bound(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Deadline()
	if l, lok := Deadline(ctx); lok && (!ok || l.Before(d)) {
		d, ok = l, true
	}
	if !ok {
		return 0, false
	}
	return max(time.Until(d), time.Millisecond), true
}
