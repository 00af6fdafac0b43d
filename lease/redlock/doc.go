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
// [New] is given N clients, one per independent master (N odd, usually
// 3 or 5; [WithForceNodeCount] allows other counts). To acquire, it sends the
// lease's acquire script to every node at once under one fresh holder id
// (a UUID), each call bounded by a per-node timeout ([WithNodeTimeout], a
// tenth of the ttl, at least 50ms, by default). The lock is obtained when a
// majority granted it and the time spent leaves validity: elapsed < ttl − drift, with drift = ttl×factor
// + 2ms (lease.WithDriftFactor, factor 0.01 by default). The lease then trusts
// its lock until a local deadline on the monotonic clock: the start of the
// acquire + ttl − drift; its Done closes then, or earlier when a refresh
// finds the lock lost from a majority, or on release. A failed attempt is
// released at once on every node whose call may have run (a node that
// answered "held by another", or whose call surely never went out, is
// skipped), so it blocks no one; where a node does not answer, the release
// is retried in the background until the ttl or until the node refuses
// connections. Acquire waits for the lock (release wake-ups over pub/sub,
// the nodes' remaining ttls, jittered backoff), and retries attempts that
// nodes did not answer in time; it gives up early only when hard errors
// leave no majority, or when every attempt for a whole ttl failed a
// majority. TryAcquire tries once.
//
// Errors of individual nodes are kept as [NodeError] values naming the node,
// joined on one line under package lease's sentinels (lease.ErrNotAcquired,
// lease.ErrLost, ...), so a failure says which nodes refused or timed out
// and why.
//
// Give each node a go-redis client with ContextTimeoutEnabled: true,
// MaxRetries: -1 and DialerRetries: 1 (New refuses the first two missing):
// the node timeout then really bounds each call, and a node that is down
// fails at once instead of spending the timeout on go-redis's own retries.
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
// # One lease contract
//
// New returns a *lease.Client, and its leases are *lease.Lease: the same
// local deadline, Done, Err, Context, keep-alive, serialised Refresh,
// Release and Reissue, the same rules for ttls and keep-alive intervals,
// and one wait loop. Code written for one kind works with both.
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
// When concurrent writers would corrupt data, the resource itself must refuse
// stale writers: pass the lease's Token with every write and have a verifier at
// the storage (package verifier) accept it only if its Seq is higher than
// any seen before, or the same token again. That is safe with the single-node
// lease (package lease) as well as with redlock, as long as the tokens
// increase: with redlock, turn on quorum fencing. Prefer the single lease +
// verifier when one Redis (with a replica) is available enough: it is
// simpler, one round trip, and its counter can be made durable
// (clock floor, replica acknowledgement). Choose redlock + quorum fencing +
// verifier when the lock service must stay up through the loss of a node.
package redlock
