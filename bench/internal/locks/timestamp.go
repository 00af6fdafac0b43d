package locks

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// timestampNote says what the timestamp lock is.
const timestampNote = "the old Redis docs recipe: SETNX key <expiry timestamp>; if taken, GET it and, if expired, " +
	"GETSET a new timestamp and own the lock if the old value was still expired; release = DEL if our timestamp " +
	"has not passed. No TTL in Redis: expiry is judged by the clients' clocks. No owner check, no waiting acquire"

// timestampLock is the lock the SETNX page of the Redis docs used to
// recommend. The key holds the Unix time in milliseconds at which the lock
// expires, set by the holder's clock; the key itself never expires.
func timestampLock(rdb redis.UniversalClient, ttl time.Duration) *Lock {
	return &Lock{Info: Info{Nodes: 1, Note: timestampNote},
		try: func(ctx context.Context, key string) (Hold, error) {
			expiry := time.Now().Add(ttl)
			ok, err := rdb.SetNX(ctx, key, stamp(expiry), 0).Result()
			if err != nil {
				return nil, err
			}
			if ok {
				return newTimestampHold(rdb, key, ttl, expiry), nil
			}
			cur, err := rdb.Get(ctx, key).Result()
			if errors.Is(err, redis.Nil) {
				return nil, ErrHeld // released in between: the next try may get it
			}
			if err != nil {
				return nil, err
			}
			if !expired(cur) {
				return nil, ErrHeld
			}
			expiry = time.Now().Add(ttl)
			old, err := rdb.GetSet(ctx, key, stamp(expiry)).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, err
			}
			// Another client may have GETSET first: then the old value is
			// its fresh timestamp, and ours overwrote it by a hair, as the
			// recipe accepts.
			if !expired(old) {
				return nil, ErrHeld
			}
			return newTimestampHold(rdb, key, ttl, expiry), nil
		}}
}

// stamp is the key's value for expiry.
func stamp(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// expired reports whether the value v, a stamp, is in the past (a value
// that is no stamp counts as expired).
func expired(v string) bool {
	ms, err := strconv.ParseInt(v, 10, 64)
	return err != nil || time.Now().UnixMilli() > ms
}

type timestampHold struct {
	unfenced
	rdb    redis.UniversalClient
	key    string
	ttl    time.Duration
	mu     sync.Mutex
	expiry time.Time // of our own timestamp
}

func newTimestampHold(rdb redis.UniversalClient, key string, ttl time.Duration, expiry time.Time) *timestampHold {
	return &timestampHold{rdb: rdb, key: key, ttl: ttl, expiry: expiry}
}

func (h *timestampHold) until() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.expiry
}

// Held is the recipe's check: our timestamp has not passed.
func (h *timestampHold) Held() bool { return time.Now().Before(h.until()) }

// Refresh writes a later timestamp while ours has not passed.
func (h *timestampHold) Refresh(ctx context.Context) error {
	if !h.Held() {
		return errors.New("setnx-getset: lock expired")
	}
	expiry := time.Now().Add(h.ttl)
	if err := h.rdb.Set(ctx, h.key, stamp(expiry), 0).Err(); err != nil {
		return err
	}
	h.mu.Lock()
	h.expiry = expiry
	h.mu.Unlock()
	return nil
}

// Release deletes the key unless our timestamp has passed (then another
// client may have taken the lock).
func (h *timestampHold) Release(ctx context.Context) error {
	if !h.Held() {
		return errors.New("setnx-getset: lock expired before release")
	}
	return h.rdb.Del(ctx, h.key).Err()
}
