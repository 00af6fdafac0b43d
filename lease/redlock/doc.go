// Package redlock is the Redlock algorithm over N independent Redis masters,
// built on the same atomic Lua scripts as the single-node lease: a lock that
// stays available while a minority of the nodes is down, for
// efficiency-class locking.
//
//	locks, err := redlock.New([]*redis.Client{a, b, c}) // three independent masters: a *lease.Client
//	l, err := locks.Acquire(ctx, "reports/daily", 30*time.Second)
//	if err != nil {
//		return err
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//
// # The algorithm
//
// [New] is given N clients, one per independent master (N odd, usually 3
// or 5; [WithForceNodeCount] allows other counts). To acquire, it sends the
// lease's acquire script to every node at once under one holder id (a
// UUID, made afresh after an attempt that had to be undone), each call
// bounded by a per-node timeout ([WithNodeTimeout]: a tenth of the ttl, at
// least 50ms, by default). The lock is obtained when a majority granted it
// and the time spent leaves validity: elapsed < ttl − drift, with drift =
// ttl×factor + 2ms (lease.WithDriftFactor, factor 0.01 by default). The
// lease trusts its lock until a local deadline on the monotonic clock, the
// start of the acquire + ttl − drift. A failed attempt is released on every
// node whose call may have run, and a release on every node; a node that
// does not answer is retried in the background until the ttl or until it
// refuses connections (Close waits for that). Acquire waits (release
// wake-ups over pub/sub, the nodes' remaining ttls, jittered backoff) and
// retries nodes that only timed out; it gives up when hard errors leave no
// majority, or when every attempt for a whole ttl failed a majority.
//
// Errors of individual nodes are kept as [NodeError] values naming the
// node, joined on one line under package lease's sentinels. Give each node
// a go-redis client with ContextTimeoutEnabled: true, MaxRetries: -1 and
// DialerRetries: 1 (New refuses the first two missing): the node timeout
// then bounds each call, and a node that is down fails at once.
//
// # Fencing tokens
//
// Without [WithQuorumFencing] the lock keeps no counter: an acquire is a
// plain SET NX PX on each node, and the token's Seq is 0, which no verifier
// accepts — the token only names the holder. With it, each node keeps a
// fencing counter, a lease's token Seq is the highest counter among the
// granting nodes, and that Seq is written back (atomic max, and stored as
// the lock's Seq) to every node that answered, and to a majority at least,
// before the lease is returned. Then tokens of non-overlapping acquisitions
// increase even when any minority of the nodes restarts empty between them.
// In the steady state the write-back costs nothing: all counters agree and
// nothing needs lifting. Lease.Reissue and heal.Write restore progress
// when a majority restarted empty and the storage has seen higher Seqs.
//
// # Redlock is not a correctness lock
//
// Redlock alone does not guarantee mutual exclusion. Two clients can hold
// the lock at the same time when
//
//   - a node's clock jumps forward (NTP step, VM migration) and the key
//     expires early there, so a second client gets a majority that includes
//     it;
//   - a node restarts without persistence (or loses writes that were not yet
//     fsynced) and forgets the key while the first holder still counts on it;
//   - the holder pauses — GC, page faults, SIGSTOP, a slow network — past its
//     deadline and then goes on acting as the holder: no local check can
//     close that window between "checked the lease" and "wrote the data".
//
// The tests of this package show the first case happening. So use redlock
// when a rare double execution costs only wasted work (caches, batch jobs,
// rate-limited calls) and you want the lock to survive a node failure; this
// is what the Redis documentation calls an efficiency lock.
//
// When concurrent writers would corrupt data, the resource itself must
// refuse stale writers: pass the lease's Token with every write and have a
// verifier at the storage (package verifier) check it, with quorum fencing
// on. Prefer package lease on one Redis + verifier when that is available
// enough: simpler, one round trip, and its counter can be made durable.
package redlock
