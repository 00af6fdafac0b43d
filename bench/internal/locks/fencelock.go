package locks

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// leaseHold is an acquisition of any fencelock lease kind (*lease.Lease:
// the single-node lease and redlock alike).
type leaseHold struct {
	l   *lease.Lease
	ttl time.Duration
}

// fencelockLock is a Lock over a fencelock client of either kind, for ttl.
func fencelockLock(info Info, ttl time.Duration, c *lease.Client) *Lock {
	held := func(l *lease.Lease, err error) (Hold, error) {
		if err != nil {
			return nil, err
		}
		return leaseHold{l, ttl}, nil
	}
	return &Lock{Info: info,
		try: func(ctx context.Context, key string) (Hold, error) {
			return held(c.TryAcquire(ctx, key, ttl))
		},
		wait: func(ctx context.Context, key string) (Hold, error) {
			return held(c.Acquire(ctx, key, ttl))
		}}
}

func (h leaseHold) Token() (fence.Token, bool)        { return h.l.Token(), true }
func (h leaseHold) Held() bool                        { return h.l.Held() }
func (h leaseHold) Refresh(ctx context.Context) error { return h.l.Refresh(ctx, h.ttl) }
func (h leaseHold) Release(ctx context.Context) error { return h.l.Release(ctx) }
func (h leaseHold) Lease() *lease.Lease               { return h.l }

var _ Leased = leaseHold{}

func leaseLock(rdb redis.UniversalClient, ttl time.Duration) (*Lock, error) {
	c, err := lease.New(rdb)
	if err != nil {
		return nil, err
	}
	info := Info{Nodes: 1, Note: "fencelock lease, defaults; waits with pub/sub wake-up"}
	return fencelockLock(info, ttl, c), nil
}

func redlockLock(nodes []redis.UniversalClient, ttl time.Duration, cfg Config) (*Lock, error) {
	var opts []redlock.Option
	note := "fencelock lease/redlock"
	if cfg.NodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(cfg.NodeTimeout))
		note += fmt.Sprintf(", node timeout %v", cfg.NodeTimeout)
	}
	if cfg.QuorumFencing {
		opts = append(opts, redlock.WithQuorumFencing(true))
		note += ", WithQuorumFencing"
	}
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		return nil, err
	}
	info := Info{Nodes: len(nodes), Note: note + ", defaults otherwise; waits with pub/sub wake-up"}
	return fencelockLock(info, ttl, c), nil
}
