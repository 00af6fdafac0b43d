package doctor

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// replicaTimeout bounds the checks of one replica the primary lists, so
// that a stalled replica does not use up the caller's time.
const replicaTimeout = 3 * time.Second

// checkReplicas runs the per-server checks on the replicas that primary
// lists, any of which a failover may promote, with primary's client
// settings (credentials, TLS) and addresses as the replicas announce them.
// A replica it cannot reach or fully check is a Warn finding, beside the
// findings of the checks that ran; only ctx's end is an error.
func checkReplicas(ctx context.Context, primary *redis.Client, cfg *config) ([]Finding, error) {
	info, err := primary.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	var fs []Finding
	for _, addr := range replicaAddrs(parseInfo(info)) {
		o := *primary.Options()
		o.Network, o.Addr, o.Dialer = "tcp", addr, nil // a Sentinel client's dialer finds the primary
		o.MaxRetries, o.DialerRetries, o.DialTimeout = -1, 1, replicaTimeout
		o.ContextTimeoutEnabled = true
		o.PoolSize, o.MinIdleConns = 1, 0
		n := redis.NewClient(&o)
		rctx, cancel := context.WithTimeout(ctx, replicaTimeout)
		found, err := checkNode(rctx, n, addr, cfg)
		cancel()
		n.Close()
		if err := ctx.Err(); err != nil {
			return fs, err
		}
		fs = append(fs, found...) // a check refused drops none that ran (a danger among them)
		if err != nil {
			fs = append(fs, Finding{Check: CheckReplication, Severity: Warn, Servers: []string{addr},
				Finding:     fmt.Sprintf("the primary lists replica %s, which the doctor could not check: %v", addr, err),
				Consequence: "A failover may promote it: its eviction policy, persistence and clock decide what locks and counters survive then.",
				Fix:         "Run the doctor against the replica itself (or make its announced address reachable, replica-announce-ip)."})
		}
	}
	return fs, nil
}

// replicaAddrs reads INFO replication's "slaveN:ip=...,port=...,..." lines.
func replicaAddrs(info map[string]string) []string {
	var addrs []string
	for k, v := range info {
		if !strings.HasPrefix(k, "slave") || strings.Trim(k[len("slave"):], "0123456789") != "" || k == "slave" {
			continue
		}
		var ip, port string
		for _, kv := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(kv, "=")
			switch name {
			case "ip":
				ip = val
			case "port":
				port = val
			}
		}
		if ip != "" && port != "" {
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
	}
	slices.Sort(addrs)
	return addrs
}
