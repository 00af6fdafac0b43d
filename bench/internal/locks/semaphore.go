package locks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
)

// SemNames is the semaphores the bench measures: fencelock's and the
// naive one people write by hand.
var SemNames = []string{"semaphore", "naive-sem"}

// Naive semaphore's waiting: a try, then a sleep that starts at
// naiveSemFirst and doubles after each failed try up to naiveSemMost,
// each drawn in [d/2, d].
const (
	naiveSemFirst = 5 * time.Millisecond
	naiveSemMost  = 100 * time.Millisecond
)

// NewSemaphore builds the semaphore called name (of SemNames) with permits
// permits on c.Single, as a Lock whose key is the semaphore's name: Try
// takes one of its permits, Wait waits for one, and a Hold is a permit.
func NewSemaphore(name string, c Clients, permits int, cfg Config) (*Lock, error) {
	var l *Lock
	switch name {
	case "semaphore":
		lc, err := lease.New(c.Single)
		if err != nil {
			return nil, err
		}
		l = semaphoreLock(lc, permits, cfg.ttl())
	case "naive-sem":
		l = naiveSemLock(c.Single, permits, cfg.ttl())
	default:
		return nil, fmt.Errorf("unknown semaphore %q (known: %v)", name, SemNames)
	}
	l.Name, l.Family, l.Nodes = name, FamilyOf(name), 1
	return l, nil
}

// semaphoreLock is fencelock's semaphore: a permit is a lease on its slot.
// It keeps one *lease.Semaphore per name, as a program keeps its own.
func semaphoreLock(c *lease.Client, permits int, ttl time.Duration) *Lock {
	var mu sync.Mutex
	sems := map[string]*lease.Semaphore{}
	sem := func(name string) (*lease.Semaphore, error) {
		mu.Lock()
		defer mu.Unlock()
		if s := sems[name]; s != nil {
			return s, nil
		}
		s, err := c.Semaphore(name, permits)
		if err == nil {
			sems[name] = s
		}
		return s, err
	}
	held := func(l *lease.Lease, err error) (Hold, error) {
		if err != nil {
			return nil, err
		}
		return leaseHold{l, ttl}, nil
	}
	return &Lock{Info: Info{Note: fmt.Sprintf("fencelock lease.Semaphore, %d permits, defaults (fair: a release hands its permit to the longest waiter, told by pub/sub)", permits)},
		try: func(ctx context.Context, key string) (Hold, error) {
			s, err := sem(key)
			if err != nil {
				return nil, err
			}
			return held(s.TryAcquire(ctx, ttl))
		},
		wait: func(ctx context.Context, key string) (Hold, error) {
			s, err := sem(key)
			if err != nil {
				return nil, err
			}
			return held(s.Acquire(ctx, ttl))
		}}
}

// naiveSemLock is the semaphore written by hand: SET NX PX on the slot
// keys NAME#0, NAME#1, ... in turn, the first that succeeds being the
// permit; released with the raw floor's compare-and-delete script. Its
// waiting acquire tries again after a short sleep that grows (see
// naiveSemFirst), and goes on through errors until its context ends.
func naiveSemLock(rdb redis.UniversalClient, permits int, ttl time.Duration) *Lock {
	try := func(ctx context.Context, key string) (Hold, error) {
		holder := uuid.NewString()
		for i := range permits {
			slot := fmt.Sprintf("%s#%d", key, i)
			ok, err := rdb.SetNX(ctx, slot, holder, ttl).Result()
			if err != nil {
				return nil, err
			}
			if ok {
				return rawHold{rdb: rdb, key: slot, holder: holder, ttl: ttl}, nil
			}
		}
		return nil, ErrHeld
	}
	return &Lock{Info: Info{Note: fmt.Sprintf("SET NX PX on %d slot keys in turn, the first that succeeds is the permit; compare-and-delete script to release; waits by trying again after %v, doubling to %v (±50%%)",
		permits, naiveSemFirst, naiveSemMost)},
		try: try,
		wait: func(ctx context.Context, key string) (Hold, error) {
			d := naiveSemFirst
			for {
				h, err := try(ctx, key)
				if err == nil {
					return h, nil
				}
				t := time.NewTimer(d/2 + rand.N(d/2+1))
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, errors.Join(errors.New("naive-sem: no permit"), ctx.Err(), err)
				case <-t.C:
				}
				d = min(2*d, naiveSemMost)
			}
		}}
}
