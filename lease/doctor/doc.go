// Package doctor checks a Redis deployment for what makes fencelock's
// locks vanish or its tokens go back, and says what to do about it.
//
//	findings, err := doctor.Check(ctx, rdb, doctor.WithTTL(30*time.Second))
//	for _, f := range findings {
//		fmt.Println(f.Severity, f.Finding, f.Fix)
//	}
//
// [Check] asks each server (a standalone server or a Sentinel-managed
// primary and the replicas it lists, every node of a Redis Cluster) with
// INFO, CONFIG GET, PING, TIME, SCAN and GET (of lock counters), and once
// without credentials, and returns [Finding]s, each with a [Severity], its consequence for
// locks and tokens, and its fix. Options describe the lease clients that
// use the deployment ([WithTTL], [WithReplicaAck], [WithClockFloor], ...),
// so findings fit them. The checks, in order:
//
//   - version: the server's name and version (INFO server: redis_version,
//     or valkey_version); older than Redis 6.2 or Valkey 7.2 is Danger.
//   - eviction: a maxmemory with a policy other than noeviction evicts
//     lock keys (they have the lease's ttl, so volatile-* policies too) and
//     counters. Danger.
//   - persistence: no AOF and no RDB forgets every lock and counter on
//     restart; RDB alone loses the writes since the last snapshot (Danger);
//     appendfsync no loses them on an OS crash (Warn).
//   - replication: a primary with replicas, without WithReplicaAck, can
//     lose its last writes in a failover (Danger; Warn when
//     min-replicas-to-write bounds the loss).
//   - clock: the server's TIME against this host's clock, beyond the drift
//     allowance of the ttl (100ms when no ttl is given). Warn.
//   - latency: PING round trips, when the p99 exceeds half the ttl's drift
//     allowance. Warn.
//   - auth: a connection without credentials is served (the default user
//     has no password), even one its ACL answers with NOPERM. Warn.
//   - transport: plaintext to a host that is not this one, or TLS without
//     certificate verification. Warn.
//   - counters: lock counters (of the prefix, [WithPrefix]) more than 24h
//     above the server's clock, poisoned by a forged or mistyped number
//     (`fencelock repair-counter` lowers them). Danger. It looks at up to
//     100,000 keys per server (100 SCAN calls of COUNT 1000).
//   - cluster-pubsub and cluster-slot, on a Redis Cluster: whether the
//     masters have sharded pub/sub, and that a lock's keys share a slot.
//
// [Danger] means a lock can vanish while its holder trusts its lease, or
// tokens can go back, in events a deployment should expect (a restart, a
// failover, memory pressure). The verifier at the storage keeps the data
// safe even then (see package verifier and the counter rule in package
// lease); a Danger finding is what would make it reject writes, or what a
// lock without a verifier cannot survive.
//
// The command `fencelock doctor` prints the findings and exits with status
// 4 when one is Danger.
//
// A check whose command the server refuses with NOPERM (an ACL user without
// +info or +config|get) is a [*RefusedError] naming the check and the
// permission: the run is incomplete, never healthy.
//
// What it cannot see: a server's clock stepping (only its offset now),
// replicas it cannot reach (a Warn says so), the save points and fsync
// policy of a managed service that disables CONFIG (a Warn says so; INFO
// still shows the eviction policy, AOF and replication), and Redlock's
// independent masters as one deployment (check each).
package doctor
