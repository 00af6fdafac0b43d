package doctor

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// ErrInvalid is an option with a bad value; Check returns it before any
// I/O.
var ErrInvalid = errors.New("doctor: invalid option")

// Option describes the lease clients that use the deployment, so that
// findings fit them, or tunes the checks.
type Option func(*config) error

type config struct {
	ttl         time.Duration
	driftFactor float64
	replicaAck  int
	clockFloor  bool
	prefix      string
	name        string
	pings       int
	replicas    bool
}

func newConfig(opts []Option) (*config, error) {
	c := &config{driftFactor: lease.DefaultDriftFactor, prefix: lease.DefaultPrefix, name: "doctor", pings: 10, replicas: true}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return c, nil
}

// allowance is the drift allowance of a lease of the ttl, 0 when the ttl
// is not known.
func (c *config) allowance() time.Duration {
	if c.ttl == 0 {
		return 0
	}
	return time.Duration(float64(c.ttl)*c.driftFactor) + 2*time.Millisecond
}

// WithTTL gives the leases' ttl. The clock check then holds skew against
// the ttl's drift allowance (ttl×factor + 2ms), and the latency check
// holds round trips against it. The default is 0, unknown: the clock check
// uses 100ms and the latency check only reports.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) error {
		if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) {
			return fmt.Errorf("ttl %v", ttl)
		}
		c.ttl = ttl
		return nil
	}
}

// WithDriftFactor gives the leases' lease.WithDriftFactor. The default is
// lease.DefaultDriftFactor, 0.01.
func WithDriftFactor(f float64) Option {
	return func(c *config) error {
		if !(f >= 0 && f < 0.5) { // NaN too
			return fmt.Errorf("drift factor %v", f)
		}
		c.driftFactor = f
		return nil
	}
}

// WithReplicaAck tells that the leases use lease.WithReplicaAck(replicas,
// ...): each acquire waits until that many replicas have its writes. The
// default is 0, none.
func WithReplicaAck(replicas int) Option {
	return func(c *config) error {
		if replicas < 0 {
			return fmt.Errorf("replica ack %d", replicas)
		}
		c.replicaAck = replicas
		return nil
	}
}

// WithClockFloor tells that the leases use lease.WithClockFloor(true). The
// default is false.
func WithClockFloor(on bool) Option {
	return func(c *config) error { c.clockFloor = on; return nil }
}

// WithPrefix gives the leases' lease.WithPrefix, used by the cluster slot
// check and the counters check. The default is lease.DefaultPrefix,
// "fencelock:".
func WithPrefix(p string) Option {
	return func(c *config) error {
		if strings.ContainsAny(p, "{}") {
			return fmt.Errorf("prefix %q has braces", p)
		}
		c.prefix = p
		return nil
	}
}

// WithSampleName sets the lock name whose keys the cluster slot check
// hashes. The default is "doctor".
func WithSampleName(name string) Option {
	return func(c *config) error {
		if err := fence.ValidateKey(name); err != nil {
			return err
		}
		c.name = name
		return nil
	}
}

// WithPings sets how many PINGs the latency check sends to each server,
// one after the other. The default is 10.
func WithPings(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1000 {
			return fmt.Errorf("pings %d", n)
		}
		c.pings = n
		return nil
	}
}

// WithReplicas sets whether Check also checks the replicas that a
// standalone or Sentinel-managed primary lists (INFO replication), since a
// failover may promote any of them. It reaches them at the addresses they
// announce, with the primary's client settings (credentials, TLS); one it
// cannot reach is a Warn finding. A Redis Cluster's replicas are always
// checked, as nodes of the cluster. The default is true.
func WithReplicas(on bool) Option {
	return func(c *config) error { c.replicas = on; return nil }
}
