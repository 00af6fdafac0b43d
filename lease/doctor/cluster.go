package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
)

// checkCluster checks what a Redis Cluster adds: how release messages
// travel, and that a lock's keys share a slot.
func checkCluster(ctx context.Context, c *redis.ClusterClient, cfg *config) ([]Finding, error) {
	var (
		mu               sync.Mutex
		sharded, classic []string
	)
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		m, err := protocol.DetectPubSub(ctx, n)
		if err != nil {
			return &ServerError{Server: serverName(ctx, n),
				Err: refused(CheckPubSub, "COMMAND INFO", fmt.Errorf("COMMAND INFO SSUBSCRIBE: %w", err))}
		}
		mu.Lock()
		defer mu.Unlock()
		if m == protocol.PubSubSharded {
			sharded = append(sharded, serverName(ctx, n))
		} else {
			classic = append(classic, serverName(ctx, n))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(sharded)
	slices.Sort(classic)
	var fs []Finding
	switch {
	case len(classic) == 0:
		fs = append(fs, Finding{Check: CheckPubSub, Severity: Info, Servers: sharded,
			Finding: "every master has sharded pub/sub (SSUBSCRIBE): a release message crosses one shard"})
	case len(sharded) == 0:
		fs = append(fs, Finding{Check: CheckPubSub, Severity: Info, Servers: classic,
			Finding:     "no master has sharded pub/sub (Redis before 7): release messages use classic PUBLISH",
			Consequence: "Every release message is broadcast over the cluster bus to every node: fine for a few locks, a cost at high release rates.",
			Fix:         "Upgrade to Redis 7 or later."})
	default:
		fs = append(fs, Finding{Check: CheckPubSub, Severity: Warn, Servers: classic,
			Finding: fmt.Sprintf("these masters lack sharded pub/sub (SSUBSCRIBE), which %s have", strings.Join(sharded, ", ")),
			Consequence: "A client asks one server and uses its answer for the whole cluster: waiters for locks on " +
				"the older masters may not be woken by releases and wake by their timers instead (up to the backoff " +
				"or the holder's ttl later).",
			Fix: "Upgrade every master to the same Redis version, 7 or later."})
	}
	f, err := slotFinding(ctx, c, cfg)
	if err != nil {
		return fs, err
	}
	return append(fs, f), nil
}

// slotFinding asks the cluster (CLUSTER KEYSLOT) where the sample lock's
// keys and channel hash.
func slotFinding(ctx context.Context, c *redis.ClusterClient, cfg *config) (Finding, error) {
	k := protocol.KeysFor(cfg.prefix, cfg.name)
	names := []string{k.Lock, k.Counter, k.Queue, k.Tickets, k.Channel, k.Ahead, k.Waiting}
	slots := make([]int64, len(names))
	for i, key := range names {
		s, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return Finding{}, fmt.Errorf("doctor: %w", refused(CheckSlot, "CLUSTER KEYSLOT", fmt.Errorf("CLUSTER KEYSLOT: %w", err)))
		}
		slots[i] = s
	}
	if slices.Min(slots) == slices.Max(slots) {
		return Finding{Check: CheckSlot, Severity: Info,
			Finding: fmt.Sprintf("the keys and channel of lock %q (%s...) share slot %d", cfg.name, k.Lock, slots[0])}, nil
	}
	var parts []string
	for i, key := range names {
		parts = append(parts, fmt.Sprintf("%s: %d", key, slots[i]))
	}
	return Finding{Check: CheckSlot, Severity: Warn,
		Finding:     "the keys of lock " + fmt.Sprintf("%q", cfg.name) + " hash to different slots: " + strings.Join(parts, ", "),
		Consequence: "The lock scripts touch the lock and its counter together: they fail with CROSSSLOT, and no lock can be taken.",
		Fix:         "The cluster does not honour hash tags ({NAME}): use a Redis Cluster or proxy that does."}, nil
}
