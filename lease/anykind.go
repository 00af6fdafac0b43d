package lease

import (
	"context"
	"time"
)

// AcquireFunc is the signature of TryAcquire and Acquire of every lease
// kind's client, L being its lease type: *Lease here, *redlock.Lease for
// lease/redlock. Both kinds take the same AcquireOptions.
type AcquireFunc[L Interface] func(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (L, error)

// AsInterface returns f with its lease as an Interface, so that code can
// take either kind's TryAcquire or Acquire:
//
//	var acquire lease.AcquireFunc[lease.Interface] = lease.AsInterface(client.Acquire)
//
// A failed acquire returns a nil Interface, not one that holds a nil
// pointer of the kind's lease type.
func AsInterface[L Interface](f AcquireFunc[L]) AcquireFunc[Interface] {
	return func(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (Interface, error) {
		l, err := f(ctx, name, ttl, opts...)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}
