package quorum

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/transport"
)

// Node is one Redis deployment a client takes its locks on (a server, a
// Sentinel-managed primary, a Cluster): the caller's client and what the
// client keeps for it. Every call to it goes through Tr.
type Node struct {
	// Addr names the node in errors.
	Addr string
	// RDB is the caller's client; fencelock adds nothing to it.
	RDB redis.UniversalClient
	// Notify is the node's one pub/sub connection, shared by its waiters;
	// its mode is the one the node's releases publish in.
	Notify *notify.Notifier
	// Probe tells a node that refuses connections from a slow one.
	Probe *transport.Prober
	// Tr batches the concurrent calls to the node into pipelines, and says
	// what each sent.
	Tr *transport.Transport
}

// NewNode returns the node of rdb, named addr. It does no I/O and starts
// no goroutine.
func NewNode(addr string, rdb redis.UniversalClient) *Node {
	return &Node{Addr: addr, RDB: rdb, Notify: notify.New(rdb), Probe: transport.NewProber(rdb), Tr: transport.NewTransport(rdb, true)}
}

// Masters returns the nodes of clients, independent masters of a quorum,
// each named by its address. It refuses, with an error wrapping
// ErrInvalid, a nil node, one given twice, and a *redis.Client whose
// settings would let a call outlive the node timeout, or spend it on
// go-redis's own retries.
func Masters(cfg *family.Config, kind string, clients []redis.UniversalClient) ([]*Node, error) {
	nodes := make([]*Node, 0, len(clients))
	seen := make(map[string]bool, len(clients))
	for i, rdb := range clients {
		if isnil.Nil(rdb) {
			return nil, cfg.Invalidf("%s: node #%d is nil", kind, i)
		}
		addr := nodeAddr(i, rdb)
		if seen[addr] {
			return nil, cfg.Invalidf("%s: node %s is given twice; the nodes must be independent", kind, addr)
		}
		seen[addr] = true
		if miss := unbounded(rdb); len(miss) > 0 {
			return nil, cfg.Invalidf("%s: node %s: set %s", kind, addr, strings.Join(miss, ", "))
		}
		nodes = append(nodes, NewNode(addr, rdb))
	}
	return nodes, nil
}

// unbounded returns the settings a node's *redis.Client lacks for the node
// timeout to bound its calls.
func unbounded(rdb redis.UniversalClient) []string {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return nil
	}
	o := c.Options()
	var miss []string
	if !o.ContextTimeoutEnabled {
		miss = append(miss, "ContextTimeoutEnabled: true (else a call waits for ReadTimeout, not the node timeout)")
	}
	if o.MaxRetries > 0 {
		miss = append(miss, fmt.Sprintf("MaxRetries: -1 (it is %d: retries only spend the node timeout)", o.MaxRetries))
	}
	return miss
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

// Caps are what a node's server can do, as far as the client knows; the
// calls read them here, so a new capability (a server version, a command
// such as DELEX) is learnt in one place.
type Caps struct {
	// PubSub is how release messages travel (sharded or not).
	PubSub protocol.PubSub
}

// Caps returns what the node is known to support.
func (n *Node) Caps() Caps { return Caps{PubSub: n.Notify.PubSub()} }

// release is how holder lets go of a lock on n.
func (n *Node) release(s *Strategy, holder string) protocol.Release {
	return protocol.Release{Holder: holder, Fair: s.cfg.Fair, Counter: s.cfg.Shared.Counter(), PubSub: n.Caps().PubSub}
}

// workers run one client's fan-out calls. A worker goroutine outlives one
// call and waits up to workerIdle for the next, so the stacks that
// go-redis's deep call path grows are reused instead of grown again for
// every node of every call; idle workers exit. One set per client.
type workers struct{ tasks chan func() }

const workerIdle = time.Second

func newWorkers() *workers { return &workers{tasks: make(chan func())} }

// run hands f to an idle worker, or starts one.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.tasks:
		case <-idle.C:
			return
		}
	}
}
