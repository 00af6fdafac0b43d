package locks

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
)

// cadScript is the raw floor's release: compare holder, then delete (the
// same script as lease/bench_test.go).
var cadScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// capScript is the raw floor's refresh: compare holder, then PEXPIRE.
var capScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)

// unfenced is what the hand-rolled locks share: no token, and no view of
// their own on whether they still hold the lock.
type unfenced struct{}

func (unfenced) Token() (fence.Token, bool) { return fence.Token{}, false }
func (unfenced) Held() bool                 { return true }

// rawLock is the floor: SET NX PX, then compare-and-delete, with the same
// go-redis client as the others. No fencing, no waiting.
func rawLock(rdb redis.UniversalClient, ttl time.Duration) *Lock {
	return &Lock{Info: Info{Nodes: 1, Note: "SET NX PX + compare-and-delete script; no waiting acquire"},
		try: func(ctx context.Context, key string) (Hold, error) {
			holder := uuid.NewString()
			ok, err := rdb.SetNX(ctx, key, holder, ttl).Result()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, ErrHeld
			}
			return rawHold{rdb: rdb, key: key, holder: holder, ttl: ttl}, nil
		}}
}

type rawHold struct {
	unfenced
	rdb         redis.UniversalClient
	key, holder string
	ttl         time.Duration
}

func (h rawHold) Refresh(ctx context.Context) error {
	return capScript.Run(ctx, h.rdb, []string{h.key}, h.holder, h.ttl.Milliseconds()).Err()
}

func (h rawHold) Release(ctx context.Context) error {
	return cadScript.Run(ctx, h.rdb, []string{h.key}, h.holder).Err()
}

// naiveLock is the usual hand-rolled lock: SET NX PX, then DEL without an
// owner check, so a holder whose key expired deletes its successor's lock.
func naiveLock(rdb redis.UniversalClient, ttl time.Duration) *Lock {
	return &Lock{Info: Info{Nodes: 1, Note: "SET NX PX, then DEL without an owner check: the usual hand-rolled Redis lock; no waiting acquire"},
		try: func(ctx context.Context, key string) (Hold, error) {
			ok, err := rdb.SetNX(ctx, key, "1", ttl).Result()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, ErrHeld
			}
			return naiveHold{rdb: rdb, key: key, ttl: ttl}, nil
		}}
}

type naiveHold struct {
	unfenced
	rdb redis.UniversalClient
	key string
	ttl time.Duration
}

func (h naiveHold) Refresh(ctx context.Context) error { return h.rdb.PExpire(ctx, h.key, h.ttl).Err() }
func (h naiveHold) Release(ctx context.Context) error { return h.rdb.Del(ctx, h.key).Err() }
