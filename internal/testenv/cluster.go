package testenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of masters without replicas, each a [Redis] with
// --cluster-enabled yes, the 16384 slots split evenly among them.
type Cluster struct {
	nodes []*Redis
}

// StartCluster starts masters redis-servers in parallel, assigns the slots,
// joins them with CLUSTER MEET and waits until every node reports
// cluster_state:ok and knows all the others. It takes about 2s: a master
// waits that long after startup before it declares the cluster ok.
// The caller must Close it.
func StartCluster(ctx context.Context, masters int) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("testenv: cluster needs at least one master, got %d", masters)
	}
	args := []string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000",
	}
	// The cluster bus listens on port+10000, so that port must be free too.
	busFree := func(port int) bool { return port+10000 < 65536 && portFree(port+10000) }
	c := &Cluster{nodes: make([]*Redis, masters)}
	errs := make([]error, masters)
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Go(func() { c.nodes[i], errs[i] = startRedis(ctx, "", args, "", busFree) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		err = c.form(ctx)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// form assigns slots, meets the nodes and waits for a healthy cluster.
func (c *Cluster) form(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = n.Client()
		defer clients[i].Close()
	}
	n := len(c.nodes)
	for i, cl := range clients {
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("testenv: CLUSTER ADDSLOTS %d-%d on %s: %w", lo, hi, c.nodes[i].Addr(), err)
		}
	}
	for _, node := range c.nodes[1:] {
		if err := clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(node.Port())).Err(); err != nil {
			return fmt.Errorf("testenv: CLUSTER MEET %s: %w", node.Addr(), err)
		}
	}
	for {
		var bad error
		for i, cl := range clients {
			if err := nodeHealthy(ctx, cl, n); err != nil {
				bad = fmt.Errorf("node %s: %w", c.nodes[i].Addr(), err)
				break
			}
		}
		if bad == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return startError("redis cluster", c.nodes[0].logPath(), 0, fmt.Errorf("%w: %w", ctx.Err(), bad))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// nodeHealthy checks that a node sees cluster_state:ok and n connected nodes,
// none of them still in handshake or failing.
func nodeHealthy(ctx context.Context, cl *redis.Client, n int) error {
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	nodes, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	if len(lines) != n {
		return fmt.Errorf("knows %d of %d nodes", len(lines), n)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 8 {
			return fmt.Errorf("bad CLUSTER NODES line: %s", l)
		}
		flags := f[2]
		if f[7] != "connected" || strings.Contains(flags, "handshake") ||
			strings.Contains(flags, "fail") || strings.Contains(flags, "noaddr") {
			return fmt.Errorf("node not settled: %s", l)
		}
	}
	return nil
}

// Addrs returns the "127.0.0.1:port" addresses of the masters.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the masters, e.g. to Kill, Pause or restart one of them.
// A restarted node rejoins from its nodes.conf.
func (c *Cluster) Nodes() []*Redis { return c.nodes }

// Client returns a new go-redis cluster client with a 1s dial timeout; the
// caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: time.Second})
}

// Close kills every node and removes their directories; it is idempotent.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	return errors.Join(errs...)
}
