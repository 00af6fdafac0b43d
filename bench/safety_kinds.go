package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// Lock kinds of `bench safety`.
const (
	kindNaive           = "naive"
	kindRedsync         = "redsync"
	kindRedlock         = "redlock"
	kindLease           = "lease"
	kindLeaseVerifier   = "lease+verifier"
	kindRedlockVerifier = "redlock+verifier"
	// kindWriteOnly is lease+verifier used wrongly: the token is checked
	// only at the write, not claimed before the read. It runs in the
	// handover scenario only, to show why the claim matters.
	kindWriteOnly = "lease+verifier/write-only"
)

// safetyKinds is every kind, in column order.
var safetyKinds = []LockInfo{
	{Name: kindNaive, Nodes: 1, Note: "SET NX PX, then DEL without an owner check: the usual hand-rolled Redis lock"},
	{Name: kindRedsync, Nodes: 5, Note: "go-redsync/redsync v4 (Redlock), expiry = ttl, its defaults otherwise; checks Until() before writing"},
	{Name: kindRedlock, Nodes: 5, Note: "fencelock lease/redlock; checks Held() before writing; token not used"},
	{Name: kindLease, Nodes: 1, Note: "fencelock lease; checks Held() before writing; token ignored"},
	{Name: kindLeaseVerifier, Nodes: 1, Fenced: true, Note: "fencelock lease + pgverifier: Claim before the read, Exec (guard + write), heal.Write on a stale token"},
	{Name: kindRedlockVerifier, Nodes: 5, Fenced: true, Note: "fencelock lease/redlock WithQuorumFencing + pgverifier: Claim before the read, Exec (guard + write), heal.Write on a stale token"},
	{Name: kindWriteOnly, Nodes: 1, Note: "misuse shown for contrast (handover only): lease + pgverifier Exec at the write, no Claim before the read"},
}

func kindInfo(name string) (LockInfo, bool) {
	for _, k := range safetyKinds {
		if k.Name == name {
			return k, true
		}
	}
	return LockInfo{}, false
}

// hold is one acquisition, as the workload sees it.
type hold interface {
	// token is the fencing token; ok is false for kinds without one.
	token() (tok fence.Token, ok bool)
	// held is the holder's own view, checked right before the write:
	// false when the library knows the lock is gone. Kinds with no such
	// check say true.
	held() bool
	// refresh extends the lock by the TTL, as a keep-alive does.
	refresh(ctx context.Context) error
	release(ctx context.Context) error
}

// safetyLock is a client of one kind over its own Redis connections, as a
// separate process would have.
type safetyLock struct {
	name    string
	ttl     time.Duration
	clients []*redis.Client
	acquire func(ctx context.Context, name string) (hold, error)
}

func (k *safetyLock) close() {
	for _, c := range k.clients {
		c.Close()
	}
}

// safetyNodeTimeout is the per-node timeout of fencelock redlock here:
// above its 50 ms default, which loaded 2-core machines miss.
const safetyNodeTimeout = 150 * time.Millisecond

// newLockKind connects a client of kind name to the Redis servers at addrs
// (one for the single-node kinds, five for the quorum kinds).
func newLockKind(name string, addrs []string, ttl time.Duration) (*safetyLock, error) {
	info, ok := kindInfo(name)
	if !ok {
		return nil, fmt.Errorf("unknown lock kind %q", name)
	}
	if len(addrs) != info.Nodes {
		return nil, fmt.Errorf("%s needs %d Redis servers, got %d", name, info.Nodes, len(addrs))
	}
	k := &safetyLock{name: name, ttl: ttl}
	var ucs []redis.UniversalClient
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true,
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
			MaxRetries: -1})
		k.clients = append(k.clients, c)
		ucs = append(ucs, c)
	}
	var err error
	switch name {
	case kindNaive:
		k.acquire = naiveAcquire(k.clients[0], ttl)
	case kindRedsync:
		k.acquire = redsyncAcquire(ucs, ttl)
	case kindLease, kindLeaseVerifier, kindWriteOnly:
		var c *lease.Client
		if c, err = lease.New(ucs[0]); err == nil {
			k.acquire = func(ctx context.Context, name string) (hold, error) {
				l, err := c.Acquire(ctx, name, ttl)
				return newLeaseHold(l, err, ttl)
			}
		}
	case kindRedlock, kindRedlockVerifier:
		var c *redlock.Client
		c, err = redlock.New(ucs, redlock.WithNodeTimeout(safetyNodeTimeout),
			redlock.WithQuorumFencing(name == kindRedlockVerifier))
		if err == nil {
			k.acquire = func(ctx context.Context, name string) (hold, error) {
				l, err := c.Acquire(ctx, name, ttl)
				return newLeaseHold(l, err, ttl)
			}
		}
	}
	if err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

// leaseHold is an acquisition of any fencelock lease kind (lease.Interface:
// the single-node lease and redlock alike).
type leaseHold struct {
	l   lease.Interface
	ttl time.Duration
}

// newLeaseHold adapts the result of a fencelock acquire with ttl.
func newLeaseHold[L lease.Interface](l L, err error, ttl time.Duration) (hold, error) {
	if err != nil {
		return nil, err
	}
	return leaseHold{l, ttl}, nil
}

func (h leaseHold) token() (fence.Token, bool)        { return h.l.Token(), true }
func (h leaseHold) held() bool                        { return h.l.Held() }
func (h leaseHold) refresh(ctx context.Context) error { return h.l.Refresh(ctx, h.ttl) }
func (h leaseHold) release(ctx context.Context) error { return h.l.Release(ctx) }

// naiveAcquire polls SET NX PX every 5 ms; its release is a plain DEL, so
// a holder whose key expired deletes its successor's lock.
func naiveAcquire(rdb *redis.Client, ttl time.Duration) func(ctx context.Context, name string) (hold, error) {
	return func(ctx context.Context, name string) (hold, error) {
		for {
			ok, err := rdb.SetNX(ctx, name, "1", ttl).Result()
			if err == nil && ok {
				return naiveHold{rdb: rdb, key: name, ttl: ttl}, nil
			}
			if ctx.Err() != nil {
				return nil, errors.Join(errors.New("naive: lock not acquired"), ctx.Err(), err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

type naiveHold struct {
	rdb *redis.Client
	key string
	ttl time.Duration
}

func (naiveHold) token() (fence.Token, bool)          { return fence.Token{}, false }
func (naiveHold) held() bool                          { return true }
func (h naiveHold) refresh(ctx context.Context) error { return h.rdb.PExpire(ctx, h.key, h.ttl).Err() }
func (h naiveHold) release(ctx context.Context) error { return h.rdb.Del(ctx, h.key).Err() }

// redsyncAcquire is go-redsync's waiting Lock with expiry ttl, retrying
// every 10–30 ms until ctx ends.
func redsyncAcquire(nodes []redis.UniversalClient, ttl time.Duration) func(ctx context.Context, name string) (hold, error) {
	pools := make([]rsredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	rs := redsync.New(pools...)
	return func(ctx context.Context, name string) (hold, error) {
		m := rs.NewMutex(name, redsync.WithExpiry(ttl), redsync.WithTries(1<<20),
			redsync.WithRetryDelayFunc(func(int) time.Duration {
				return 10*time.Millisecond + rand.N(20*time.Millisecond)
			}))
		if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		return redsyncHold{m}, nil
	}
}

type redsyncHold struct{ m *redsync.Mutex }

func (redsyncHold) token() (fence.Token, bool) { return fence.Token{}, false }
func (h redsyncHold) held() bool               { return time.Now().Before(h.m.Until()) }
func (h redsyncHold) refresh(ctx context.Context) error {
	ok, err := h.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: extend failed")
	}
	return err
}
func (h redsyncHold) release(ctx context.Context) error {
	_, err := h.m.UnlockContext(ctx)
	return err
}
