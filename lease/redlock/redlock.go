package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/observe"
)

// New returns a lease.Client that takes its locks on nodes, one client per
// independent Redis master (not replicas of one another, not one cluster):
// the same Client and Lease types as lease.New's, with the quorum's rules.
// It takes this package's options and lease's SharedOptions. It refuses,
// with an error wrapping lease.ErrInvalid and before any I/O: a node count
// that is not odd and at least three (unless [WithForceNodeCount]), a nil
// or repeated node, and a *redis.Client node without the settings the node
// timeout needs (ContextTimeoutEnabled: true, MaxRetries: -1), naming the
// setting. DialerRetries: 1 is advised too: a node that is down then fails
// at once rather than after the node timeout. fencelock adds nothing to the node clients and
// never closes them.
func New[C redis.UniversalClient](nodes []C, opts ...Option) (*lease.Client, error) {
	var leaseOpts []lease.Option
	var own []option
	for i, o := range opts {
		switch o := o.(type) {
		case option:
			own = append(own, o)
		case lease.Option:
			leaseOpts = append(leaseOpts, o)
		default:
			return nil, fmt.Errorf("%w: redlock: option #%d is nil or not one of fencelock's", lease.ErrInvalid, i)
		}
	}
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		clients[i] = n
	}
	return lease.New(nil, append(leaseOpts, kind{func(cfg *family.Config) error {
		cfg.NewStrategy = func(cfg *family.Config) (family.Strategy, error) { return newQuorum(cfg, clients, own) }
		return nil
	}})...)
}

// newQuorum is the strategy of a client on N independent masters.
func newQuorum(cfg *family.Config, clients []redis.UniversalClient, opts []option) (*quorum.Strategy, error) {
	set := settings{wakeup: true, invalid: cfg.Invalidf}
	for _, o := range opts {
		if err := o(&set); err != nil {
			return nil, err
		}
	}
	if n := len(clients); n > 0 && !set.anyNodeCount && (n < 3 || n%2 == 0) {
		return nil, cfg.Invalidf("redlock: %d nodes: Redlock needs an odd number, at least 3 (or WithForceNodeCount)", n)
	}
	nodes := make([]*quorum.Node, 0, len(clients))
	seen := make(map[string]bool, len(clients))
	for i, rdb := range clients {
		if isnil.Nil(rdb) {
			return nil, cfg.Invalidf("redlock: node #%d is nil", i)
		}
		addr := nodeAddr(i, rdb)
		if seen[addr] {
			return nil, cfg.Invalidf("redlock: node %s is given twice; the nodes must be independent", addr)
		}
		seen[addr] = true
		if err := checkNode(rdb); err != nil {
			return nil, cfg.Invalidf("redlock: node %s: %v", addr, err)
		}
		nodes = append(nodes, quorum.NewNode(addr, rdb))
	}
	qc := quorum.Config{Shared: cfg, Kind: observe.KindRedlock, Name: "redlock", Nodes: nodes,
		NodeTimeout: set.nodeTimeout, MinNodeTimeout: DefaultNodeTimeout, ErrNodeTimeout: ErrNodeTimeout,
		NodeError: func(addr string, err error) error { return &NodeError{Addr: addr, Err: err} },
		Unfenced:  !set.quorumFencing, SetAgain: true, Quorum: true}
	if set.quorumFencing {
		qc.WriteBack = writeBack
	}
	if set.wakeup {
		qc.Listen = listen
	} else {
		qc.Listen = func(_ context.Context, a *quorum.Attempt) family.Waker { return &wakeup{a: a} }
	}
	return quorum.New(qc)
}

// checkNode refuses a node client whose settings would let a call outlive
// the node timeout, or spend it on go-redis's own retries.
func checkNode(rdb redis.UniversalClient) error {
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
	if len(miss) > 0 {
		return fmt.Errorf("set %s", strings.Join(miss, ", "))
	}
	return nil
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
