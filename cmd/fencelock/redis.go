//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// badURLError is a --redis or REDIS_URL value that cannot be used: a usage
// error.
type badURLError struct{ err error }

func (e *badURLError) Error() string { return e.err.Error() }
func (e *badURLError) Unwrap() error { return e.err }

// splitURLs splits flag values (and REDIS_URL) into URLs. Values may hold
// several URLs separated by commas; a comma-separated piece without "://"
// is another host of the URL before it (redis+cluster://a:1,b:2).
func splitURLs(vals []string) ([]string, error) {
	var urls []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case strings.Contains(p, "://"):
				urls = append(urls, p)
			case p == "":
				return nil, &badURLError{errors.New("bad Redis URL list: an empty item: want scheme://host:port,...")}
			case len(urls) == 0:
				return nil, &badURLError{fmt.Errorf("bad Redis URL list: %q has no scheme: want scheme://host:port,...", redactURL(p))}
			default:
				urls[len(urls)-1] += "," + p
			}
		}
	}
	return urls, nil
}

// multiHost turns SCHEME://[userinfo@]H1,H2,...[/path][?query] into go-redis's
// form with one host and the others as addr= query parameters.
func multiHost(scheme, rest string) string {
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo := ""
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	hosts := strings.Split(authority, ",")
	for _, h := range hosts[1:] {
		sep := "?"
		if strings.Contains(tail, "?") {
			sep = "&"
		}
		tail += sep + "addr=" + h
	}
	return scheme + "://" + userinfo + hosts[0] + tail
}

// newRedis returns a go-redis client for one URL. node tunes it as a
// Redlock node (no command retries, one dial attempt), unless the URL says
// otherwise. tc (nil for none) is the --tls-* flags' CA and client
// certificate, for a rediss URL.
func newRedis(raw string, node bool, tc *tls.Config) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, &badURLError{fmt.Errorf("bad Redis URL %q: no scheme", redactURL(raw))}
	}
	goURL := raw // what go-redis parses, and may quote in its errors
	bad := func(err error) error {
		return &badURLError{redactErr(fmt.Errorf("bad Redis URL %q: %w", redactURL(raw), err), raw, goURL)}
	}
	if err := checkRedisURL(scheme, rest); err != nil {
		return nil, bad(err)
	}
	switch scheme {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, bad(err)
		}
		if o.TLSConfig, err = withTLS(o.TLSConfig, tc, raw); err != nil {
			return nil, err
		}
		o.ContextTimeoutEnabled = true
		o.MaxRetries, o.DialerRetries = retries(node, o.MaxRetries, o.DialerRetries)
		return redis.NewClient(o), nil
	case "redis+cluster", "rediss+cluster":
		goURL = multiHost(strings.TrimSuffix(scheme, "+cluster"), rest)
		o, err := redis.ParseClusterURL(goURL)
		if err != nil {
			return nil, bad(err)
		}
		if o.TLSConfig, err = withTLS(o.TLSConfig, tc, raw); err != nil {
			return nil, err
		}
		o.ContextTimeoutEnabled = true
		o.MaxRetries, o.DialerRetries = retries(node, o.MaxRetries, o.DialerRetries)
		return redis.NewClusterClient(o), nil
	case "redis+sentinel", "rediss+sentinel":
		goURL = multiHost(strings.TrimSuffix(scheme, "+sentinel"), rest)
		o, err := redis.ParseFailoverURL(goURL)
		if err != nil {
			return nil, bad(err)
		}
		if o.MasterName == "" {
			return nil, bad(errors.New("a sentinel URL needs ?master_name=NAME"))
		}
		if o.TLSConfig, err = withTLS(o.TLSConfig, tc, raw); err != nil {
			return nil, err
		}
		o.ContextTimeoutEnabled = true
		o.MaxRetries, o.DialerRetries = retries(node, o.MaxRetries, o.DialerRetries)
		return redis.NewFailoverClient(o), nil
	}
	return nil, bad(fmt.Errorf("unknown scheme %q (want redis, rediss, unix, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel)", scheme))
}

// retries are a client's retry settings, unless the URL set them. Dialing
// is not retried (go-redis tries 5 times by default, 100ms apart, for
// each of a command's tries): a Redis that refuses connections is
// reported as such at once, rather than as a timeout that hides why. A
// Redlock node also does not retry commands: the node timeout must bound
// each call.
func retries(node bool, maxRetries, dialerRetries int) (int, int) {
	if maxRetries == 0 && node {
		maxRetries = -1
	}
	if dialerRetries == 0 {
		dialerRetries = 1
	}
	return maxRetries, dialerRetries
}

// backend is the lock service: one Redis deployment (lease) or Redlock over
// several (lease/redlock).
type backend interface {
	// acquire takes the lock with keep-alive, or with n > 0 a permit of
	// semaphore name of n permits: once (TryAcquire) or waiting until ctx
	// ends (Acquire).
	acquire(ctx context.Context, name string, n permits, ttl time.Duration, wait bool) (*lease.Lease, error)
	// inspect returns the lock's state; with Redlock, a partial view and an
	// error when too few nodes answered.
	inspect(ctx context.Context, name string) (view, error)
	// advance lifts the counter to at least floor and returns it.
	advance(ctx context.Context, name string, floor uint64) (uint64, error)
	// close waits, until ctx ends, for the client's background cleanups
	// (a waiter that gave up leaving the fair queue), then closes Redis.
	close(ctx context.Context)
}

// errNoRedis is the usage error of a command given no Redis. There is no
// default: a lock tool that fell back to localhost would, run from cron
// (which does not pass on a shell's export), lock each host's own Redis,
// and nothing would be excluded.
var errNoRedis = &badURLError{errors.New("no Redis given: pass --redis URL or set REDIS_URL (fencelock never guesses its server)")}

// redisURLs returns the Redis URLs the command uses: the --redis flags,
// else REDIS_URL; neither is errNoRedis.
func (g *globals) redisURLs() ([]string, error) {
	vals := []string(g.redis)
	if len(vals) == 0 {
		env := strings.TrimSpace(os.Getenv("REDIS_URL"))
		if env == "" {
			return nil, errNoRedis
		}
		vals = []string{env}
	}
	return splitURLs(vals)
}

// connect builds the backend from the --redis flags or REDIS_URL.
func (g *globals) connect() (backend, error) {
	urls, err := g.redisURLs()
	if err != nil {
		return nil, err
	}
	tc, err := g.tls.config()
	if err != nil {
		return nil, err
	}
	if n := len(urls); n > 1 && (n < 3 || n%2 == 0) {
		return nil, &badURLError{fmt.Errorf("%d Redis URLs: Redlock needs an odd number, at least 3, of --redis servers (one URL for one Redis deployment)", n)}
	}
	if len(urls) == 1 {
		rdb, err := newRedis(urls[0], false, tc)
		if err != nil {
			return nil, err
		}
		c, err := lease.New(rdb, lease.WithPrefix(g.prefix))
		if err != nil {
			rdb.Close()
			return nil, err
		}
		return &single{c: c, rdb: rdb, prefix: g.prefix}, nil
	}
	var rdbs []redis.UniversalClient
	closeAll := func() {
		for _, r := range rdbs {
			r.Close()
		}
	}
	for _, u := range urls {
		rdb, err := newRedis(u, true, tc)
		if err != nil {
			closeAll()
			return nil, err
		}
		rdbs = append(rdbs, rdb)
	}
	c, err := redlock.New(rdbs, lease.WithPrefix(g.prefix), redlock.WithQuorumFencing(true))
	if err != nil {
		closeAll()
		return nil, err
	}
	return &quorum{c: c, rdbs: rdbs, prefix: g.prefix}, nil
}

// releaseChannel is the lock's release channel: every waiting acquire
// subscribes to it.
func releaseChannel(prefix, name string) string { return protocol.KeysFor(prefix, name).Channel }

// numSub counts the subscribers of channel: on a Redis Cluster, summed over
// the nodes (a subscriber is connected to one node).
//
// On a Redis Cluster with sharded pub/sub (Redis 7 and later) a waiting
// acquire listens with SSUBSCRIBE on the master of its channel's slot (see
// package notify), which PUBSUB SHARDNUMSUB counts; the two counts add up,
// so a waiter of an older fencelock (classic SUBSCRIBE) counts too.
func numSub(ctx context.Context, rdb redis.UniversalClient, channel string) (int64, error) {
	classic, err := classicNumSub(ctx, rdb, channel)
	if err != nil {
		return 0, err
	}
	sharded, err := shardNumSub(ctx, rdb, channel)
	return classic + sharded, err
}

// classicNumSub counts the classic subscribers of channel (PUBSUB NUMSUB),
// on every shard of a cluster.
func classicNumSub(ctx context.Context, rdb redis.UniversalClient, channel string) (int64, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var total int64
		err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			m, err := n.PubSubNumSub(ctx, channel).Result()
			mu.Lock()
			total += m[channel]
			mu.Unlock()
			return err
		})
		return total, err
	}
	m, err := rdb.PubSubNumSub(ctx, channel).Result()
	return m[channel], err
}

// single is one Redis deployment.
type single struct {
	c      *lease.Client
	rdb    redis.UniversalClient
	prefix string
}

func (s *single) acquire(ctx context.Context, name string, n permits, ttl time.Duration, wait bool) (*lease.Lease, error) {
	return acquireWith(ctx, s.c, name, n, ttl, wait)
}

// acquireWith takes a lease with keep-alive (of a permit, with n > 0),
// once or, to wait, until ctx ends.
func acquireWith(ctx context.Context, c *lease.Client, name string, n permits, ttl time.Duration, wait bool) (*lease.Lease, error) {
	if n > 0 {
		return acquirePermit(ctx, c, name, n, ttl, wait)
	}
	if wait {
		return c.Acquire(ctx, name, ttl, lease.WithKeepAlive(0))
	}
	return c.TryAcquire(ctx, name, ttl, lease.WithKeepAlive(0))
}

func (s *single) inspect(ctx context.Context, name string) (view, error) {
	info, err := s.c.Inspect(ctx, name)
	if err != nil {
		return view{}, err
	}
	n, err := numSub(ctx, s.rdb, releaseChannel(s.prefix, name))
	if err != nil {
		return view{}, fmt.Errorf("count waiters: %w", err)
	}
	st := stateOf(info, n)
	if st.Poisoned, err = poisoned(ctx, s.rdb, st.Counter); err != nil {
		return view{}, err
	}
	return view{Name: name, Mode: "single", state: st}, nil
}

func (s *single) advance(ctx context.Context, name string, floor uint64) (uint64, error) {
	return s.c.Advance(ctx, name, floor)
}

func (s *single) close(ctx context.Context) {
	_ = s.c.Close(ctx)
	s.rdb.Close()
}

// quorum is Redlock over independent masters, with quorum fencing.
type quorum struct {
	c      *lease.Client
	rdbs   []redis.UniversalClient // in the client's node order
	prefix string
}

func (q *quorum) acquire(ctx context.Context, name string, n permits, ttl time.Duration, wait bool) (*lease.Lease, error) {
	return acquireWith(ctx, q.c, name, n, ttl, wait)
}

// nodeWaitTimeout bounds the waiter count on one Redlock node.
const nodeWaitTimeout = time.Second

func (q *quorum) inspect(ctx context.Context, name string) (view, error) {
	info, err := q.c.Inspect(ctx, name)
	if err != nil && len(info.Nodes) == 0 {
		return view{}, err
	}
	v := view{Name: name, Mode: "redlock", Quorum: len(q.rdbs)/2 + 1, Nodes: make([]nodeView, len(info.Nodes))}
	v.state = stateOf(lease.Info{Name: name, Holder: info.Holder, Token: info.Token, TTL: info.TTL, LastSeq: info.LastSeq}, 0)
	v.Waiters = nil
	channel := releaseChannel(q.prefix, name)
	var wg sync.WaitGroup
	for i, ni := range info.Nodes {
		v.Nodes[i] = nodeView{Addr: ni.Addr}
		if ni.Err != nil {
			v.Nodes[i].Error = ni.Err.Error()
			continue
		}
		v.Nodes[i].Answered = true
		v.Nodes[i].state = stateOf(ni.Info, 0)
		if i >= len(q.rdbs) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, nodeWaitTimeout)
			defer cancel()
			n, err := numSub(nctx, q.rdbs[i], channel)
			if err != nil {
				v.Nodes[i].Waiters = nil
				v.Nodes[i].Error = "count waiters: " + err.Error()
				return
			}
			v.Nodes[i].Waiters = &n
			if v.Nodes[i].Poisoned, err = poisoned(nctx, q.rdbs[i], v.Nodes[i].Counter); err != nil {
				v.Nodes[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	for _, n := range v.Nodes {
		v.Poisoned = v.Poisoned || n.Poisoned
		if n.Waiters != nil && (v.Waiters == nil || *n.Waiters > *v.Waiters) {
			w := *n.Waiters
			v.Waiters = &w
		}
	}
	return v, err
}

func (q *quorum) advance(ctx context.Context, name string, floor uint64) (uint64, error) {
	return q.c.Advance(ctx, name, floor)
}

func (q *quorum) close(ctx context.Context) {
	_ = q.c.Close(ctx)
	for _, r := range q.rdbs {
		r.Close()
	}
}
