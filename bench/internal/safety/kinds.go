package safety

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// writeMode is how a kind's cycle uses its token.
type writeMode int

const (
	unguarded  writeMode = iota // the token, if any, is not used
	claimFirst                  // Claim before the read, Exec (guard + write), heal.Write on a stale token
	atWrite                     // Exec at the write only, no Claim: the misuse shown in handover
)

// kind is one column of the matrix: a lock from package locks and how the
// workload uses it.
type kind struct {
	report.LockInfo
	lock  string // the locks.Lock it runs on
	write writeMode
	// quorumFencing turns on redlock's quorum fencing.
	quorumFencing bool
	// poll, when set, is how often the acquire tries the lock (a random
	// delay in the range): for locks with no waiting acquire, or one that
	// gives up before the round's deadline. Otherwise the lock's own
	// waiting acquire is used.
	poll [2]time.Duration
	// handoverOnly: run in the handover scenario only.
	handoverOnly bool
}

// Lock kinds of `bench safety`.
const (
	kindNaive           = "naive"
	kindTimestamp       = "setnx-getset"
	kindRedsync         = "redsync"
	kindRedlock         = "redlock"
	kindLease           = "lease"
	kindLeaseVerifier   = "lease+verifier"
	kindRedlockVerifier = "redlock+verifier"
	kindWriteOnly       = "lease+verifier/write-only"
)

// kinds is every kind, in column order.
var kinds = []kind{
	{LockInfo: report.LockInfo{Name: kindNaive, Nodes: 1,
		Note: "SET NX PX, then DEL without an owner check: the usual hand-rolled Redis lock; polled every 5 ms"},
		lock: "naive", poll: [2]time.Duration{5 * time.Millisecond, 5 * time.Millisecond}},
	{LockInfo: report.LockInfo{Name: kindTimestamp, Nodes: 1,
		Note: "the old Redis docs recipe: SETNX a timestamp, GETSET it once expired; expiry judged by the clients' clocks, no TTL in Redis; polled every 5 ms"},
		lock: "setnx-getset", poll: [2]time.Duration{5 * time.Millisecond, 5 * time.Millisecond}},
	{LockInfo: report.LockInfo{Name: kindRedsync, Nodes: 5,
		Note: "go-redsync/redsync v4 (Redlock), expiry = ttl, its defaults otherwise, tried every 10-30 ms; checks Until() before writing"},
		lock: "redsync-5", poll: [2]time.Duration{10 * time.Millisecond, 30 * time.Millisecond}},
	{LockInfo: report.LockInfo{Name: kindRedlock, Nodes: 5, Note: "fencelock lease/redlock; checks Held() before writing; token not used"},
		lock: "redlock-5"},
	{LockInfo: report.LockInfo{Name: kindLease, Nodes: 1, Note: "fencelock lease; checks Held() before writing; token ignored"},
		lock: "lease"},
	{LockInfo: report.LockInfo{Name: kindLeaseVerifier, Nodes: 1, Fenced: true,
		Note: "fencelock lease + pgverifier: Claim before the read, Exec (guard + write), heal.Write on a stale token"},
		lock: "lease", write: claimFirst},
	{LockInfo: report.LockInfo{Name: kindRedlockVerifier, Nodes: 5, Fenced: true,
		Note: "fencelock lease/redlock WithQuorumFencing + pgverifier: Claim before the read, Exec (guard + write), heal.Write on a stale token"},
		lock: "redlock-5", write: claimFirst, quorumFencing: true},
	{LockInfo: report.LockInfo{Name: kindWriteOnly, Nodes: 1,
		Note: "misuse shown for contrast (handover only): lease + pgverifier Exec at the write, no Claim before the read"},
		lock: "lease", write: atWrite, handoverOnly: true},
}

func init() {
	for i := range kinds {
		kinds[i].Family = locks.FamilyOf(kinds[i].lock)
	}
}

// kindNamed returns the kind called name.
func kindNamed(name string) (kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return kind{}, false
}

func kindNames() []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.Name)
	}
	return out
}

// nodeTimeout is the per-node timeout of fencelock redlock here: above its
// 50 ms default, which loaded 2-core machines miss.
const nodeTimeout = 150 * time.Millisecond

// client is one holder's client of a kind, over its own Redis connections,
// as a separate process would have.
type client struct {
	kind
	lock    *locks.Lock
	ttl     time.Duration
	clients []*redis.Client
}

// newClient connects a client of kind k to the Redis servers at addrs (one
// for the single-node kinds, five for the quorum kinds).
func newClient(k kind, addrs []string, ttl time.Duration) (*client, error) {
	if len(addrs) != k.Nodes {
		return nil, fmt.Errorf("%s needs %d Redis servers, got %d", k.Name, k.Nodes, len(addrs))
	}
	opts := make([]*redis.Options, len(addrs))
	for i, a := range addrs {
		opts[i] = &redis.Options{Addr: a}
	}
	return newClientOpts(k, opts, ttl)
}

// newClientOpts is newClient on servers dialled with opts (their address
// and credentials; the timeouts are the bench's).
func newClientOpts(k kind, opts []*redis.Options, ttl time.Duration) (*client, error) {
	if len(opts) != k.Nodes {
		return nil, fmt.Errorf("%s needs %d Redis servers, got %d", k.Name, k.Nodes, len(opts))
	}
	c := &client{kind: k, ttl: ttl}
	var cs locks.Clients
	for _, o := range opts {
		o := *o
		o.ContextTimeoutEnabled = true
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
		o.MaxRetries = -1
		rc := redis.NewClient(&o)
		c.clients = append(c.clients, rc)
		cs.Many = append(cs.Many, rc)
	}
	cs.Single = cs.Many[0]
	l, err := locks.New(k.lock, cs, locks.Config{TTL: ttl, NodeTimeout: nodeTimeout, QuorumFencing: k.quorumFencing})
	if err != nil {
		c.close()
		return nil, err
	}
	c.lock = l
	return c, nil
}

// acquire takes the lock, waiting until ctx ends.
func (c *client) acquire(ctx context.Context, key string) (locks.Hold, error) {
	if c.poll[1] > 0 {
		return c.lock.Poll(ctx, key, c.poll[0], c.poll[1])
	}
	return c.lock.Wait(ctx, key)
}

func (c *client) close() {
	if c.lock != nil {
		c.lock.Close()
	}
	for _, rc := range c.clients {
		rc.Close()
	}
}
