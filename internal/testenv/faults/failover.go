package faults

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
)

// Failover is a Redis primary with a replica behind a proxy that plays the
// part of a virtual IP: clients dial [Failover.Addr] and reach whichever
// server is the primary.
type Failover struct {
	primary, replica *testenv.Redis
	px               *Proxy
}

// StartFailover starts a primary, its replica and the proxy in front of
// them. The caller must Close it.
func StartFailover(ctx context.Context, opt testenv.RedisOptions) (*Failover, error) {
	p, r, err := testenv.StartReplicated(ctx, opt)
	if err != nil {
		return nil, err
	}
	px, err := StartProxy(p.Addr())
	if err != nil {
		r.Close()
		p.Close()
		return nil, err
	}
	return &Failover{primary: p, replica: r, px: px}, nil
}

// Addr is what clients dial: the proxy.
func (f *Failover) Addr() string { return f.px.Addr() }

// Primary is the server that is the primary now.
func (f *Failover) Primary() *testenv.Redis { return f.primary }

// Client returns a new direct client of the current primary; the caller
// closes it.
func (f *Failover) Client() *redis.Client { return f.primary.Client() }

// LagReplica makes the replica miss what the primary writes next: the
// replica is paused and the primary drops its link. (SIGSTOP alone is not
// enough: the kernel's socket buffer would deliver the stream on resume.)
func (f *Failover) LagReplica(ctx context.Context) error {
	if err := f.replica.Pause(); err != nil {
		return err
	}
	c := f.primary.Client()
	defer c.Close()
	return c.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err()
}

// Promote kills the primary, promotes the (lagging) replica and points the
// proxy at it, cutting every client connection.
func (f *Failover) Promote(ctx context.Context) error {
	if err := f.primary.Kill(); err != nil {
		return err
	}
	if err := f.replica.Resume(); err != nil {
		return err
	}
	if err := f.replica.Promote(ctx); err != nil {
		return err
	}
	f.primary, f.replica = f.replica, f.primary
	f.px.SetTarget(f.primary.Addr())
	return nil
}

// Rejoin restarts the old primary as a replica of the new one.
func (f *Failover) Rejoin(ctx context.Context) error {
	if err := f.replica.Start(ctx); err != nil {
		return err
	}
	return f.replica.ReplicaOf(ctx, f.primary)
}

// Close stops the proxy and both servers.
func (f *Failover) Close() error {
	err := f.px.Close()
	f.replica.Close()
	f.primary.Close()
	return err
}
