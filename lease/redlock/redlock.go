package redlock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/observe"
)

// New returns a lease.Client that takes its locks on nodes, one client per
// independent Redis master (not replicas of one another, not one cluster),
// with the quorum's rules. It refuses, with an error wrapping
// lease.ErrInvalid and before any I/O, a node count that is not odd and at
// least three (unless [WithForceNodeCount]), a nil or repeated node, and a
// *redis.Client node without ContextTimeoutEnabled: true and MaxRetries:
// -1. fencelock adds nothing to the node clients and never closes them.
func New[C redis.UniversalClient](nodes []C, opts ...Option) (*lease.Client, error) {
	var leaseOpts []any
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
	c, err := family.NewClient(func(cfg *family.Config) (family.Strategy, error) { return newQuorum(cfg, clients, own) }, leaseOpts...)
	if err != nil {
		return nil, err
	}
	return c.(*lease.Client), nil
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
	nodes, err := quorum.Masters(cfg, "redlock", clients)
	if err != nil {
		return nil, err
	}
	qc := quorum.Config{Shared: cfg, Kind: observe.KindRedlock, Name: "redlock", Nodes: nodes, Quorum: true,
		NodeTimeout: set.nodeTimeout, MinNodeTimeout: DefaultNodeTimeout, ErrNodeTimeout: ErrNodeTimeout,
		NodeError: func(addr string, err error) error { return &NodeError{Addr: addr, Err: err} },
		Unfenced:  !set.quorumFencing, SetAgain: true, Listen: listen}
	if set.quorumFencing {
		qc.WriteBack = writeBack
	}
	if !set.wakeup {
		qc.Listen = func(_ context.Context, a *quorum.Attempt) family.Waker { return &wakeup{a: a} }
	}
	return quorum.New(qc)
}
