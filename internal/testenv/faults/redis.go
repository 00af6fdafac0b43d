package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
)

// Restart kills r (SIGKILL; without persistence it comes back empty) and
// starts it again on the same port.
func Restart(ctx context.Context, r *testenv.Redis) error {
	if err := r.Kill(); err != nil {
		return err
	}
	return r.Start(ctx)
}

// ExpireAll does to the keys on c's server what a forward jump of its clock
// past every TTL does: each key with a TTL expires now; keys without one
// (fencing counters) stay. It returns how many keys it expired.
func ExpireAll(ctx context.Context, c *redis.Client) (int, error) {
	n := 0
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			return n, err
		}
		if ttl > 0 {
			if err := c.PExpire(ctx, k, time.Millisecond).Err(); err != nil {
				return n, err
			}
			n++
		}
	}
	if err := iter.Err(); err != nil {
		return n, err
	}
	time.Sleep(5 * time.Millisecond) // past the 1 ms
	return n, nil
}

// JunkPrefix starts the names of the filler keys Evict writes.
const JunkPrefix = "faults-junk:"

// Evict sets maxmemory just above what c's server uses, with allkeys-lru,
// and writes filler keys until every other key (locks and fencing counters
// among them) is evicted. It returns how many filler keys it wrote. Undo it
// with Unevict.
func Evict(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	used := infoInt(info, "used_memory")
	if used <= 0 {
		return 0, errors.New("faults: evict: no used_memory in INFO")
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		return 0, err
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+512<<10, 10)).Err(); err != nil {
		return 0, err
	}
	value := strings.Repeat("x", 16<<10)
	filled := 0
	for filled < 20000 {
		pipe := c.Pipeline()
		for range 32 {
			pipe.Set(ctx, fmt.Sprintf("%s%d", JunkPrefix, filled), value, 0)
			filled++
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return filled, err
		}
		// SCAN does not touch the keys' LRU clock, unlike EXISTS.
		left, err := otherKeys(ctx, c)
		if err != nil {
			return filled, err
		}
		if left == 0 {
			return filled, nil
		}
	}
	return filled, fmt.Errorf("faults: evict: keys still there after %d filler keys", filled)
}

// Unevict lifts the memory limit and deletes Evict's filler keys.
func Unevict(ctx context.Context, c *redis.Client) error {
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		return err
	}
	iter := c.Scan(ctx, 0, JunkPrefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return iter.Err()
}

// otherKeys counts the keys that are not Evict's filler.
func otherKeys(ctx context.Context, c *redis.Client) (int, error) {
	n := 0
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if !strings.HasPrefix(iter.Val(), JunkPrefix) {
			n++
		}
	}
	return n, iter.Err()
}

func infoInt(info, field string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
