package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// peerHold is what the peers' holds share: no fencing token.
type peerHold struct{ unfenced }

// redsyncLock is go-redsync with expiry ttl and its defaults otherwise (32
// tries, retry delay uniform in [50ms, 250ms)), as its README uses it.
func redsyncLock(nodes []redis.UniversalClient, ttl time.Duration) *Lock {
	pools := make([]rsredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	rs := redsync.New(pools...)
	return &Lock{Info: Info{Nodes: len(nodes),
		Note: fmt.Sprintf("go-redsync/redsync v4, expiry %v (the bench's TTL), defaults otherwise (32 tries, retry delay 50-250ms); Held checks Until()", ttl)},
		try: func(ctx context.Context, key string) (Hold, error) {
			m := rs.NewMutex(key, redsync.WithExpiry(ttl))
			if err := m.TryLockContext(ctx); err != nil {
				return nil, err
			}
			return redsyncHold{m: m}, nil
		},
		wait: func(ctx context.Context, key string) (Hold, error) {
			m := rs.NewMutex(key, redsync.WithExpiry(ttl))
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return redsyncHold{m: m}, nil
		}}
}

type redsyncHold struct {
	peerHold
	m *redsync.Mutex
}

func (h redsyncHold) Held() bool { return time.Now().Before(h.m.Until()) }

func (h redsyncHold) Refresh(ctx context.Context) error {
	ok, err := h.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: extend failed")
	}
	return err
}

func (h redsyncHold) Release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock returned false")
	}
	return err
}

// redislockBackoff is the retry strategy of the waiting acquire: the
// exponential backoff of bsm/redislock at the smallest minimum its doc
// recommends ("not less than 16ms").
func redislockBackoff() redislock.RetryStrategy {
	return redislock.ExponentialBackoff(16*time.Millisecond, 256*time.Millisecond)
}

func redislockLock(rdb redis.UniversalClient, ttl time.Duration) *Lock {
	c := redislock.New(rdb)
	wrap := func(l *redislock.Lock, err error) (Hold, error) {
		if err != nil {
			return nil, err
		}
		return redislockHold{l: l, ttl: ttl}, nil
	}
	return &Lock{Info: Info{Nodes: 1, Note: "bsm/redislock; waiting acquire with ExponentialBackoff(16ms, 256ms)"},
		try: func(ctx context.Context, key string) (Hold, error) {
			return wrap(c.Obtain(ctx, key, ttl, nil))
		},
		wait: func(ctx context.Context, key string) (Hold, error) {
			return wrap(c.Obtain(ctx, key, ttl, &redislock.Options{RetryStrategy: redislockBackoff()}))
		}}
}

type redislockHold struct {
	peerHold
	l   *redislock.Lock
	ttl time.Duration
}

func (h redislockHold) Refresh(ctx context.Context) error { return h.l.Refresh(ctx, h.ttl, nil) }
func (h redislockHold) Release(ctx context.Context) error { return h.l.Release(ctx) }

// rueidislockNote says how rueidislock is set up and released.
const rueidislockNote = "redis/rueidis rueidislock with its own rueidis client; KeyMajority 1 (one key on the one server; " +
	"its default is 2 of 3 keys), defaults otherwise: KeyValidity 5s extended every 2.5s, TryNextAfter 20ms, " +
	"client-side caching on, NoLoopTracking off (its README example turns it on, for Redis >= 7.0.5), SET PXAT. " +
	"The lock is a context: try = TryWithContext, wait = WithContext (woken by client-side-caching invalidations, " +
	"no pub/sub), release = calling the cancel func it returns, which blocks until the key's delete script has " +
	"returned (so a release is complete when it returns; a failed delete is not reported)"

// rueidislockLock is rueidislock on the server of opt, with a rueidis
// client of its own, as its README sets it up for one Redis instance.
func rueidislockLock(opt redis.Options, clientName string) (*Lock, error) {
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
		return nil, fmt.Errorf("rueidislock: %w", err)
	}
	wrap := func(ctx context.Context, cancel context.CancelFunc, err error) (Hold, error) {
		if err != nil {
			return nil, err
		}
		return rueidisHold{ctx: ctx, cancel: cancel}, nil
	}
	return &Lock{Info: Info{Nodes: 1, Note: rueidislockNote},
		try: func(ctx context.Context, key string) (Hold, error) {
			return wrap(lk.TryWithContext(ctx, key))
		},
		wait: func(ctx context.Context, key string) (Hold, error) {
			return wrap(lk.WithContext(ctx, key))
		},
		close: lk.Close}, nil
}

// rueidisHold: the lock lives as long as the context it returns; its
// cancel func releases it and returns once the delete has run. Nothing
// reports whether that delete worked, so the release cannot fail.
type rueidisHold struct {
	peerHold
	ctx    context.Context
	cancel context.CancelFunc
}

func (h rueidisHold) Held() bool { return h.ctx.Err() == nil }

// Refresh has nothing to do: rueidislock extends its keys itself.
func (h rueidisHold) Refresh(context.Context) error { return nil }

func (h rueidisHold) Release(context.Context) error { h.cancel(); return nil }
