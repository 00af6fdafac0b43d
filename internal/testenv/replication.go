package testenv

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// StartReplicated starts a primary and a replica of it (--replicaof), both
// with opt, and waits until the replica reports master_link_status:up.
func StartReplicated(ctx context.Context, opt RedisOptions) (primary, replica *Redis, err error) {
	primary, err = StartRedis(ctx, opt)
	if err != nil {
		return nil, nil, err
	}
	replica, err = startRedis(ctx, RedisOptions{Args: opt.Args, Server: opt.Server}, primary.Addr(), nil)
	if err == nil {
		err = replica.waitLinkUp(ctx)
	}
	if err == nil {
		err = primary.waitReplicaOnline(ctx)
	}
	if err != nil {
		closeAll([]*Redis{primary, replica})
		return nil, nil, err
	}
	return primary, replica, nil
}

// Promote turns a replica into a master (REPLICAOF NO ONE); it also stays a
// master across later restarts.
func (r *Redis) Promote(ctx context.Context) error {
	return r.setReplicaOf(ctx, "")
}

// ReplicaOf makes r a replica of primary (REPLICAOF host port), e.g. to
// demote an old primary after a failover, and waits until the link is up.
func (r *Redis) ReplicaOf(ctx context.Context, primary *Redis) error {
	if err := r.setReplicaOf(ctx, primary.Addr()); err != nil {
		return err
	}
	return r.waitLinkUp(ctx)
}

func (r *Redis) setReplicaOf(ctx context.Context, addr string) error {
	host, port := "NO", "ONE"
	if addr != "" {
		host, port, _ = net.SplitHostPort(addr)
	}
	c := r.Client()
	defer c.Close()
	if err := c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return fmt.Errorf("testenv: REPLICAOF %s %s on %s: %w", host, port, r.Addr(), err)
	}
	r.mu.Lock()
	r.replicaOf = addr
	r.mu.Unlock()
	return nil
}

// waitReplicaOnline waits until WAIT 1 on the primary is answered by a
// replica. A replica whose link is up counts for WAIT only after its first
// REPLCONF ACK, which it sends once a second.
func (r *Redis) waitReplicaOnline(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c := r.Client()
	defer c.Close()
	for {
		n, err := c.Wait(ctx, 1, 100*time.Millisecond).Result()
		if err == nil && n >= 1 {
			return nil
		}
		if ctx.Err() != nil {
			return startError("replica of "+r.Addr()+" acknowledging", r.logPath(), 0, fmt.Errorf("%w (WAIT: %d, %v)", ctx.Err(), n, err))
		}
	}
}

// waitLinkUp polls INFO replication until master_link_status:up (at most 15s).
func (r *Redis) waitLinkUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c := r.Client()
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		select {
		case <-ctx.Done():
			return startError("replication link of "+r.Addr(), r.logPath(), 0,
				fmt.Errorf("%w (INFO replication: %q, %v)", ctx.Err(), info, err))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
