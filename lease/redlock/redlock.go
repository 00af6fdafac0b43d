package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/batch"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/observe"
)

// Client takes locks on a fixed set of independent Redis masters. It uses
// the clients given to [New], which the caller keeps and closes. Its waiting
// Acquire calls share one pub/sub connection per node (see [WithWakeup]),
// opened from that node's client when the first of them waits and closed a
// second after the last one is done. A Client is safe for concurrent use.
type Client struct {
	nodes  []node
	quorum int
	cfg    family.Config
	notify []*notify.Notifier // per node, in node order
	// pending are background cleanups (the release after a failed
	// attempt), which Close waits for.
	pending lifetime.Pending
	closed  atomic.Bool
}

// Close waits, until ctx ends, for the client's background cleanups: the
// release of a failed attempt's lock on the nodes that may have granted
// it. A process that exits right after an Acquire ended calls it, so that
// it leaves no lock behind for its ttl. Afterwards Acquire and TryAcquire
// fail with ErrInvalid; leases already held keep working. Close does not
// close the node clients, and its error is ctx's when cleanups were still
// running. Closing twice is fine.
func (c *Client) Close(ctx context.Context) error {
	if c == nil || ctx == nil {
		return invalid("nil client or context")
	}
	c.closed.Store(true)
	err := c.pending.Wait(ctx)
	for _, n := range c.nodes {
		n.batch.Close()
	}
	return err
}

// New returns a Client over nodes, one client per independent Redis master
// (not replicas of one another, not one cluster). It takes the options of
// package lease that both kinds share and this package's own, and refuses
// lease-only ones (lease.WithFair, lease.WithReplicaAck). It checks the options and
// the node count — odd and at least three, unless [WithForceNodeCount] — and
// rejects nil clients and two clients with the same address. It does no I/O.
// The clients are not closed by fencelock; close them yourself when done.
//
// Each node's script calls go out batched: the calls that the Client's
// goroutines make to a node at the same moment are sent together as one
// pipeline, at most two in flight per node, and each call still ends at
// its own deadline (the node timeout or the caller's context). A burst of
// a thousand waiters is a few pipelines per node rather than a thousand
// round trips, and meets the default node timeout. A lone call is sent at
// once, directly. Batched calls pass through a node client's
// ProcessPipelineHook, lone ones through its ProcessHook.
// [Client.Close] stops the idle senders.
//
// As lease.New does, New adds to each node's client a hook on dialing that
// records its last failed dial, named in that node's [NodeError] when it did
// not answer in time.
func New(nodes []redis.UniversalClient, opts ...lease.Option) (*Client, error) {
	cfg := family.New(observe.KindRedlock, ErrInvalid)
	cfg.NodeTimeout, cfg.Wakeup = DefaultNodeTimeout, true
	if err := family.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	switch {
	case len(nodes) == 0:
		return nil, invalid("no nodes")
	case !cfg.AnyNodeCount && (len(nodes) < 3 || len(nodes)%2 == 0):
		return nil, invalid("%d nodes: Redlock needs an odd number, at least 3 (or WithForceNodeCount)", len(nodes))
	}
	c := &Client{quorum: len(nodes)/2 + 1, cfg: cfg}
	seen := make(map[string]bool, len(nodes))
	for i, rdb := range nodes {
		if isnil.Nil(rdb) {
			return nil, invalid("node #%d is nil", i)
		}
		addr := nodeAddr(i, rdb)
		if seen[addr] {
			return nil, invalid("node %s is given twice; the nodes must be independent", addr)
		}
		seen[addr] = true
		b := batch.New(rdb)
		n := node{addr: addr, rdb: b, batch: b, notify: notify.New(rdb), dials: family.DialsOf(rdb)}
		c.nodes = append(c.nodes, n)
		c.notify = append(c.notify, n.notify)
	}
	return c, nil
}

// nodeAddr names a node for errors: its address when the client has one.
func nodeAddr(i int, rdb redis.UniversalClient) string {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return "cluster(" + strings.Join(c.Options().Addrs, ",") + ")"
	case *redis.Ring:
		var addrs []string
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		return "ring(" + strings.Join(addrs, ",") + ")"
	}
	return fmt.Sprintf("node#%d", i)
}

// Nodes returns the addresses of the nodes, in the order given to [New].
func (c *Client) Nodes() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	return addrs
}

// Quorum returns the number of nodes that make a majority: len(nodes)/2 + 1.
func (c *Client) Quorum() int { return c.quorum }

// drift is the clock drift allowance for ttl.
func (c *Client) drift(ttl time.Duration) time.Duration {
	return lifetime.Drift(ttl, c.cfg.DriftFactor)
}

// check validates a lock name and ttl before any I/O.
func (c *Client) check(name string, ttl time.Duration) error {
	if err := fence.ValidateKey(name); err != nil {
		return invalid("%w", err)
	}
	if err := lifetime.CheckTTL(ttl, c.cfg.DriftFactor); err != nil {
		return invalid("%w", err)
	}
	return nil
}

func (c *Client) keys(name string) protocol.Keys { return protocol.KeysFor(c.cfg.Prefix, name) }

// counter is how the nodes keep a lock's counter.
func (c *Client) counter() protocol.Counter {
	return protocol.Counter{TTL: c.cfg.CounterTTL, ClockFloor: c.cfg.ClockFloor}
}

// Advance lifts the lock's counter to at least floor on every node (atomic
// max), e.g. after a verifier rejected a token and reported the storage's
// highest Seq, so that the next acquisition gets a larger one. It succeeds
// when a majority of nodes took it, and returns, as the lease's Advance
// does, a counter value that the next token is greater than (under quorum
// fencing): the smallest counter among the nodes that took it, since any
// later majority shares a node with them. When fewer than a majority took
// it, the errors of the others are returned, joined.
func (c *Client) Advance(ctx context.Context, name string, floor uint64) (uint64, error) {
	if c == nil || len(c.nodes) == 0 || ctx == nil {
		return 0, invalid("nil client or context")
	}
	if err := fence.ValidateKey(name); err != nil {
		return 0, invalid("%w", err)
	}
	if floor >= fence.MaxSeq {
		return 0, invalid("floor %d leaves no room below 2^53-1", floor)
	}
	k := c.keys(name)
	rs := fanout(ctx, c.nodes, c.cfg.NodeTimeout, advanceOp(k, floor, c.counter()), nil)
	ok, low := 0, uint64(0)
	for _, r := range rs {
		if r.err == nil {
			if ok == 0 || r.val < low {
				low = r.val
			}
			ok++
		}
	}
	if ok < c.quorum {
		return 0, fmt.Errorf("redlock: advance %q to %d: %d of %d nodes, need %d: %w",
			name, floor, ok, len(c.nodes), c.quorum, failed(rs))
	}
	return low, nil
}
