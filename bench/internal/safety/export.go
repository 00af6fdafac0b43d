package safety

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// What `bench check` shares with safety: the lock kinds, their clients and
// the Redis topologies the faults act on.

// CheckKinds is the lock kinds `bench check` runs: every safety kind but the
// handover-only misuse, in column order.
func CheckKinds() []report.LockInfo {
	var out []report.LockInfo
	for _, k := range kinds {
		if !k.handoverOnly {
			out = append(out, k.LockInfo)
		}
	}
	return out
}

// LockClient is one holder's client of a lock kind over its own Redis
// connections, as a separate process would have.
type LockClient struct{ c *client }

// NewLockClient connects a client of the kind called name to the servers
// dialled with opts (one for the single-node kinds, five for the quorum
// kinds), with lock TTL ttl.
func NewLockClient(name string, opts []*redis.Options, ttl time.Duration) (*LockClient, error) {
	k, ok := kindNamed(name)
	if !ok {
		return nil, errUnknownKind(name)
	}
	c, err := newClientOpts(k, opts, ttl)
	if err != nil {
		return nil, err
	}
	return &LockClient{c}, nil
}

func errUnknownKind(name string) error {
	return fmt.Errorf("unknown lock kind %q (known: %v)", name, kindNames())
}

// Acquire takes the lock on key the way safety does (the kind's own waiting
// acquire, or polling), until ctx ends.
func (l *LockClient) Acquire(ctx context.Context, key string) (locks.Hold, error) {
	return l.c.acquire(ctx, key)
}

// Fenced reports whether the kind writes through the verifier (claim before
// read, heal.Write on a stale token).
func (l *LockClient) Fenced() bool { return l.c.write == claimFirst }

// Close closes the client's connections.
func (l *LockClient) Close() { l.c.close() }

// Site is one Redis node of a [Topology]: a plain server, or a primary with
// a replica behind a proxy (a virtual IP) that a failover moves.
type Site struct{ s *site }

// Addr is what lock clients dial.
func (s Site) Addr() string { return s.s.addr() }

// Server is the site's current primary.
func (s Site) Server() *testenv.Redis { return s.s.server() }

// Failover is the primary/replica pair, or nil for a plain site.
func (s Site) Failover() *faults.Failover { return s.s.fo }

// Admin runs f with a direct client of the site's current primary.
func (s Site) Admin(f func(c *redis.Client) error) error { return s.s.admin(f) }

// Topology is a set of throwaway Redis sites.
type Topology struct{ t *topology }

// StartTopology starts n sites; those for which failover(i) holds are a
// primary with a replica behind a proxy.
func StartTopology(ctx context.Context, n int, failover func(i int) bool) (*Topology, error) {
	t, err := startSites(ctx, n, failover)
	if err != nil {
		return nil, err
	}
	return &Topology{t}, nil
}

// Sites is the topology's sites, in order.
func (t *Topology) Sites() []Site {
	out := make([]Site, len(t.t.sites))
	for i, s := range t.t.sites {
		out[i] = Site{s}
	}
	return out
}

// Close stops every server.
func (t *Topology) Close() { t.t.close() }

// PgAddr is the TCP address of the PostgreSQL in dsn, or an error when it
// is reached over a Unix socket.
func PgAddr(dsn string) (string, error) { return pgAddr(dsn) }
