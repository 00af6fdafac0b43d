package protocol

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// PubSub is how release messages travel on a deployment: the one decision
// that both the releasing side (the scripts' SPUBLISH or PUBLISH) and the
// waiting side (package notify's SSUBSCRIBE or SUBSCRIBE) follow.
type PubSub int8

const (
	// PubSubUnknown is a Redis Cluster whose servers were not asked yet
	// ([DetectPubSub]). Releases try SPUBLISH and fall back to PUBLISH.
	PubSubUnknown PubSub = iota
	// PubSubClassic is PUBLISH and SUBSCRIBE.
	PubSubClassic
	// PubSubSharded is SPUBLISH and SSUBSCRIBE on the lock's shard (a
	// cluster of Redis 7 or later), so a message crosses one shard, not
	// the cluster bus.
	PubSubSharded
	// PubSubNone is a client without usable subscriptions (a *redis.Ring,
	// whose pub/sub connections serve one shard each): releases PUBLISH,
	// waiters wake by their own timers.
	PubSubNone
)

// PubSubFor is what rdb's type alone decides: Unknown for a cluster,
// None for a ring, Classic otherwise.
func PubSubFor(rdb redis.UniversalClient) PubSub {
	switch rdb.(type) {
	case *redis.ClusterClient:
		return PubSubUnknown
	case *redis.Ring:
		return PubSubNone
	}
	return PubSubClassic
}

// DetectPubSub asks a cluster's servers whether they have sharded pub/sub.
func DetectPubSub(ctx context.Context, rdb redis.UniversalClient) (PubSub, error) {
	// COMMAND INFO answers [nil] for a command the server does not have.
	v, err := rdb.Do(ctx, "COMMAND", "INFO", "SSUBSCRIBE").Slice()
	if err != nil {
		return PubSubUnknown, err
	}
	if len(v) == 1 && v[0] != nil {
		return PubSubSharded, nil
	}
	return PubSubClassic, nil
}

// spublish is the scripts' flag: SPUBLISH (with PUBLISH as fallback) on a
// cluster that has, or may have, sharded pub/sub.
func (p PubSub) spublish() any { return flag(p == PubSubSharded || p == PubSubUnknown) }
