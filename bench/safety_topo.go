package main

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

// site is one Redis node as the lock clients see it: a plain server, or,
// for the failover scenario, a primary and a replica behind a proxy that
// plays the part of a virtual IP moving to the promoted replica.
type site struct {
	r       *testenv.Redis // the server clients reach (the primary)
	replica *testenv.Redis // failover sites only
	px      *faultProxy    // failover sites only: what clients dial
}

// addr is what lock clients dial.
func (s *site) addr() string {
	if s.px != nil {
		return s.px.Addr()
	}
	return s.r.Addr()
}

func (s *site) close() {
	if s == nil {
		return
	}
	if s.px != nil {
		s.px.Close()
	}
	if s.replica != nil {
		s.replica.Close()
	}
	s.r.Close()
}

// admin runs f with a direct client of the site's current primary.
func (s *site) admin(f func(c *redis.Client) error) error {
	c := s.r.Client()
	defer c.Close()
	return f(c)
}

// topology is the Redis servers of one cell: one site for the
// single-node kinds, five for the quorum kinds.
type topology struct {
	sites []*site
}

func (t *topology) addrs() []string {
	out := make([]string, len(t.sites))
	for i, s := range t.sites {
		out[i] = s.addr()
	}
	return out
}

func (t *topology) close() {
	for _, s := range t.sites {
		s.close()
	}
}

// faulted is the site a node fault hits: the only one, or, of five, one of
// the three the first holder gets while the last two are cut off.
func (t *topology) faulted() *site {
	if len(t.sites) == 1 {
		return t.sites[0]
	}
	return t.sites[2]
}

// cutOff is the sites the first holder cannot reach in a node-fault
// scenario (the network partition of Kleppmann's Redlock example): none
// for one node, the last two of five.
func (t *topology) cutOff() []*site {
	if len(t.sites) == 1 {
		return nil
	}
	return t.sites[3:]
}

// startTopology starts n servers; with failover the faulted one is a
// primary with a replica, behind a proxy.
func startTopology(ctx context.Context, n int, failover bool) (*topology, error) {
	t := &topology{}
	faulted := 0
	if n > 1 {
		faulted = 2
	}
	for i := range n {
		if !failover || i != faulted {
			r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
			if err != nil {
				t.close()
				return nil, err
			}
			t.sites = append(t.sites, &site{r: r})
			continue
		}
		p, r, err := testenv.StartReplicated(ctx, testenv.RedisOptions{})
		if err != nil {
			t.close()
			return nil, err
		}
		s := &site{r: p, replica: r}
		t.sites = append(t.sites, s)
		if s.px, err = startProxy(p.Addr()); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// jumpClock does to the site's keys what a forward jump of its clock past
// every TTL does: each key with a TTL expires now; keys without one (the
// fencing counters) stay.
func (s *site) jumpClock(ctx context.Context) (int, error) {
	n := 0
	err := s.admin(func(c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				return err
			}
			if ttl > 0 {
				if err := c.PExpire(ctx, k, time.Millisecond).Err(); err != nil {
					return err
				}
				n++
			}
		}
		return iter.Err()
	})
	time.Sleep(5 * time.Millisecond)
	return n, err
}

// restart kills the server (no persistence: it comes back empty) and
// starts it again on the same port.
func (s *site) restart(ctx context.Context) error {
	if err := s.r.Kill(); err != nil {
		return err
	}
	return s.r.Start(ctx)
}

// lagReplica makes the replica miss what the primary writes next: it is
// paused and the primary drops its link. (SIGSTOP alone is not enough: the
// kernel's socket buffer would deliver the stream when it resumes.)
func (s *site) lagReplica(ctx context.Context) error {
	if err := s.replica.Pause(); err != nil {
		return err
	}
	return s.admin(func(c *redis.Client) error {
		return c.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err()
	})
}

// failover kills the primary, promotes the lagging replica and points the
// proxy at it.
func (s *site) failover(ctx context.Context) error {
	if err := s.r.Kill(); err != nil {
		return err
	}
	if err := s.replica.Resume(); err != nil {
		return err
	}
	if err := s.replica.Promote(ctx); err != nil {
		return err
	}
	s.r, s.replica = s.replica, s.r
	s.px.SetTarget(s.r.Addr())
	return nil
}

// rejoin restarts the old primary as a replica of the new one.
func (s *site) rejoin(ctx context.Context) error {
	if err := s.replica.Start(ctx); err != nil {
		return err
	}
	return s.replica.ReplicaOf(ctx, s.r)
}

// pauseFor freezes the server (SIGSTOP) for d.
func (s *site) pauseFor(ctx context.Context, d time.Duration) error {
	if err := s.r.Pause(); err != nil {
		return err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	return s.r.Resume()
}

const junkPrefix = "junk:"

// evict fills the server's memory under allkeys-lru until every key but
// the filler is evicted (the locks and the fencing counters among them).
func (s *site) evict(ctx context.Context) (int, error) {
	filled := 0
	err := s.admin(func(c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		used := infoInt(info, "used_memory")
		if used <= 0 {
			return errors.New("evict: no used_memory in INFO")
		}
		if err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
			return err
		}
		if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+512<<10, 10)).Err(); err != nil {
			return err
		}
		value := strings.Repeat("x", 16<<10)
		for filled < 20000 {
			pipe := c.Pipeline()
			for range 32 {
				pipe.Set(ctx, fmt.Sprintf("%s%d", junkPrefix, filled), value, 0)
				filled++
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
			// SCAN does not touch the keys' LRU clock, unlike EXISTS.
			left, err := nonJunkKeys(ctx, c)
			if err != nil {
				return err
			}
			if left == 0 {
				return nil
			}
		}
		return fmt.Errorf("evict: lock keys still there after %d filler keys", filled)
	})
	return filled, err
}

// unevict lifts the memory limit and deletes the filler.
func (s *site) unevict(ctx context.Context) error {
	return s.admin(func(c *redis.Client) error {
		if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			return err
		}
		iter := c.Scan(ctx, 0, junkPrefix+"*", 1000).Iterator()
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
	})
}

func nonJunkKeys(ctx context.Context, c *redis.Client) (int, error) {
	n := 0
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if !strings.HasPrefix(iter.Val(), junkPrefix) {
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
