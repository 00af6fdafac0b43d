package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// ttl is the lock ttl every lock gets, except redsync, which keeps its
// default expiry (8s).
const ttl = 10 * time.Second

// release ends one acquisition.
type release func(ctx context.Context) error

// locker is one lock under test.
type locker struct {
	name  string
	nodes int // Redis servers it talks to
	// try makes one acquisition attempt and fails when the lock is held.
	try func(ctx context.Context, key string) (release, error)
	// wait is the library's own waiting acquire; nil when it has none.
	wait func(ctx context.Context, key string) (release, error)
	note string
	// close frees what the lock holds beyond the shared clients (the
	// rueidis client of rueidislock); nil when nothing.
	close func()
}

// clients is what a lock is built on.
type clients struct {
	single    redis.UniversalClient   // the single-node server
	many      []redis.UniversalClient // independent servers for the quorum locks
	singleOpt redis.Options           // how single is dialled, for locks with their own client
	name      string                  // CLIENT SETNAME for clients a lock makes itself; "" for none
}

// free calls l.close, if any.
func (l locker) free() {
	if l.close != nil {
		l.close()
	}
}

// lockNames is every lock, in table order.
var lockNames = []string{"raw", "naive", "lease", "redlock-3", "redlock-5", "redsync-1", "redsync-5", "redislock", "rueidislock"}

// cadScript is the raw floor's release: compare holder, then delete (the
// same script as lease/bench_test.go).
var cadScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

var errHeld = errors.New("bench: lock is held")

// rawLock is the floor: SET NX PX, then compare-and-delete, with the same
// go-redis client as the others. No fencing, no waiting.
func rawLock(rdb redis.UniversalClient) locker {
	return locker{name: "raw", nodes: 1, note: "SET NX PX + compare-and-delete script; no waiting acquire",
		try: func(ctx context.Context, key string) (release, error) {
			holder := uuid.NewString()
			ok, err := rdb.SetNX(ctx, key, holder, ttl).Result()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errHeld
			}
			return func(ctx context.Context) error {
				return cadScript.Run(ctx, rdb, []string{key}, holder).Err()
			}, nil
		}}
}

// naiveLock is SETNX then DEL: no ttl, no owner check.
func naiveLock(rdb redis.UniversalClient) locker {
	return locker{name: "naive", nodes: 1, note: "SETNX + DEL (no ttl, no owner check); no waiting acquire",
		try: func(ctx context.Context, key string) (release, error) {
			ok, err := rdb.SetNX(ctx, key, "1", 0).Result()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errHeld
			}
			return func(ctx context.Context) error { return rdb.Del(ctx, key).Err() }, nil
		}}
}

// leaseRelease adapts the result of an acquire of any fencelock lease kind.
func leaseRelease[L lease.Interface](l L, err error) (release, error) {
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func leaseLock(rdb redis.UniversalClient) (locker, error) {
	c, err := lease.New(rdb)
	if err != nil {
		return locker{}, err
	}
	wrap := leaseRelease[*lease.Lease]
	return locker{name: "lease", nodes: 1, note: "fencelock lease, defaults; waits with pub/sub wake-up",
		try: func(ctx context.Context, key string) (release, error) {
			return wrap(c.TryAcquire(ctx, key, ttl))
		},
		wait: func(ctx context.Context, key string) (release, error) {
			return wrap(c.Acquire(ctx, key, ttl))
		}}, nil
}

func redlockLock(nodes []redis.UniversalClient) (locker, error) {
	c, err := redlock.New(nodes)
	if err != nil {
		return locker{}, err
	}
	wrap := leaseRelease[*redlock.Lease]
	return locker{name: fmt.Sprintf("redlock-%d", len(nodes)), nodes: len(nodes),
		note: "fencelock lease/redlock, defaults; waits with pub/sub wake-up",
		try: func(ctx context.Context, key string) (release, error) {
			return wrap(c.TryAcquire(ctx, key, ttl))
		},
		wait: func(ctx context.Context, key string) (release, error) {
			return wrap(c.Acquire(ctx, key, ttl))
		}}, nil
}

// redsyncLock is go-redsync with its defaults (expiry 8s, 32 tries, retry
// delay uniform in [50ms, 250ms)), as its README uses it.
func redsyncLock(nodes []redis.UniversalClient) locker {
	pools := make([]rsredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	rs := redsync.New(pools...)
	unlock := func(m *redsync.Mutex) release {
		return func(ctx context.Context) error {
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				err = errors.New("redsync: unlock returned false")
			}
			return err
		}
	}
	return locker{name: fmt.Sprintf("redsync-%d", len(nodes)), nodes: len(nodes),
		note: "go-redsync/redsync v4, defaults (expiry 8s, 32 tries, retry delay 50-250ms)",
		try: func(ctx context.Context, key string) (release, error) {
			m := rs.NewMutex(key)
			if err := m.TryLockContext(ctx); err != nil {
				return nil, err
			}
			return unlock(m), nil
		},
		wait: func(ctx context.Context, key string) (release, error) {
			m := rs.NewMutex(key)
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return unlock(m), nil
		}}
}

// redislockBackoff is the retry strategy of the waiting acquire: the
// exponential backoff of bsm/redislock at the smallest minimum its doc
// recommends ("not less than 16ms").
func redislockBackoff() redislock.RetryStrategy {
	return redislock.ExponentialBackoff(16*time.Millisecond, 256*time.Millisecond)
}

func redislockLock(rdb redis.UniversalClient) locker {
	c := redislock.New(rdb)
	wrap := func(l *redislock.Lock, err error) (release, error) {
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}
	return locker{name: "redislock", nodes: 1,
		note: "bsm/redislock; waiting acquire with ExponentialBackoff(16ms, 256ms)",
		try: func(ctx context.Context, key string) (release, error) {
			return wrap(c.Obtain(ctx, key, ttl, nil))
		},
		wait: func(ctx context.Context, key string) (release, error) {
			return wrap(c.Obtain(ctx, key, ttl, &redislock.Options{RetryStrategy: redislockBackoff()}))
		}}
}

// rueidislockNote says how rueidislock is set up and released.
const rueidislockNote = "redis/rueidis rueidislock with its own rueidis client; KeyMajority 1 (one key on the one server; " +
	"its default is 2 of 3 keys), defaults otherwise: KeyValidity 5s extended every 2.5s, TryNextAfter 20ms, " +
	"client-side caching on, NoLoopTracking off (its README example turns it on, for Redis >= 7.0.5), SET PXAT. " +
	"The lock is a context: try = TryWithContext, wait = WithContext (woken by client-side-caching invalidations, " +
	"no pub/sub), release = calling the cancel func it returns, which blocks until the key's delete script has " +
	"returned (so a release is complete when it returns; a failed delete is not reported)"

// rueidislockLock is rueidislock on the server of opt, with a rueidis
// client of its own, as its README sets it up for one Redis instance.
func rueidislockLock(opt redis.Options, clientName string) (locker, error) {
	lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{
			InitAddress: []string{opt.Addr},
			Username:    opt.Username,
			Password:    opt.Password,
			SelectDB:    opt.DB,
			TLSConfig:   opt.TLSConfig,
			ClientName:  clientName,
		},
		KeyMajority: 1,
	})
	if err != nil {
		return locker{}, fmt.Errorf("rueidislock: %w", err)
	}
	// The lock lives as long as the context it returns; its cancel func
	// releases it and returns once the delete has run. Nothing reports
	// whether that delete worked, so the release cannot fail.
	wrap := func(_ context.Context, cancel context.CancelFunc, err error) (release, error) {
		if err != nil {
			return nil, err
		}
		return func(context.Context) error { cancel(); return nil }, nil
	}
	return locker{name: "rueidislock", nodes: 1, note: rueidislockNote,
		try: func(ctx context.Context, key string) (release, error) {
			return wrap(lk.TryWithContext(ctx, key))
		},
		wait: func(ctx context.Context, key string) (release, error) {
			return wrap(lk.WithContext(ctx, key))
		},
		close: lk.Close}, nil
}

// newLocker builds the named lock on c: its single server or the first
// nodes of its many.
func newLocker(name string, c clients) (locker, error) {
	single, many := c.single, c.many
	need := func(n int) ([]redis.UniversalClient, error) {
		if len(many) < n {
			return nil, fmt.Errorf("%s needs %d independent Redis servers, have %d", name, n, len(many))
		}
		return many[:n], nil
	}
	switch name {
	case "raw":
		return rawLock(single), nil
	case "naive":
		return naiveLock(single), nil
	case "lease":
		return leaseLock(single)
	case "redlock-3", "redlock-5":
		nodes, err := need(int(name[len(name)-1] - '0'))
		if err != nil {
			return locker{}, err
		}
		return redlockLock(nodes)
	case "redsync-1":
		return redsyncLock([]redis.UniversalClient{single}), nil
	case "redsync-5":
		nodes, err := need(5)
		if err != nil {
			return locker{}, err
		}
		return redsyncLock(nodes), nil
	case "redislock":
		return redislockLock(single), nil
	case "rueidislock":
		return rueidislockLock(c.singleOpt, c.name)
	}
	return locker{}, fmt.Errorf("unknown lock %q (known: %v)", name, lockNames)
}
