// Package lease is a lock lease on Redis that hands out fencing tokens.
//
//	locks, err := lease.New(rdb) // a go-redis client with ContextTimeoutEnabled: true
//	l, err := locks.Acquire(ctx, "orders/17", 30*time.Second, lease.WithKeepAlive(10*time.Second))
//	if err != nil {
//		return err
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	err = write(l.Context(), l.Token()) // the storage checks the token (package verifier)
//
// Each acquisition is one atomic Lua script: if the lock key is free it
// increments the lock's counter and sets the key (holder id and Seq) with a
// PX ttl, and returns the new Seq as a [fence.Token]. Tokens of one lock name
// grow with every acquisition, so the protected storage can reject a write
// from a holder whose lease has passed on (see package verifier). Without
// that check, a lease is an efficiency lock only: a holder that pauses (GC,
// page fault, SIGSTOP) past its ttl keeps writing as if it still held it.
//
// # One client, two kinds
//
// A [Client] is made by [New], on one Redis deployment (a standalone
// server, Sentinel, or a Redis Cluster: the keys of one lock share a hash
// slot), or by redlock.New, on a quorum of independent masters. Both are
// the same type with the same [Lease]; what differs lies under them. Options
// say which kind they configure, and the compiler refuses one of the other
// kind: [SharedOption]s serve both. [Client.TryAcquire] tries once;
// [Client.Acquire] waits, woken by a pub/sub message on release. A [Lease]
// keeps a local deadline on the monotonic clock and closes [Lease.Done]
// (and cancels [Lease.Context]) when it passes, when a refresh finds the
// lock gone, or on release; [WithKeepAlive] refreshes it in the background.
//
// [Client.Semaphore] lets N holders of one name in at once (one Redis
// only): each permit is a [Lease] on a slot of its own, named NAME#i
// ([PermitName]), with that slot's tokens, so a verifier fences each slot
// as it fences a lock. What it protects and its limits: [Semaphore].
//
// fencelock leaves the go-redis clients it is given alone: no hook, no
// wrapper, no process-wide state; every command goes through the client's
// own methods, so the client's hooks and wrappers see them.
//
// No call outlives its context: give the go-redis client
// ContextTimeoutEnabled: true (see [New]), and every call returns by its
// context's deadline. A call that failed may have run or surely did not
// (an error reply, a refused dial, a context that had ended before it was
// sent): one that may have run is undone in the background (the lock it may
// have taken released, on every node that may have granted it), one that
// did not never is. An acquire that its context ended while the server
// refused connections names the refused dial: "lease: not acquired:
// "job": context deadline exceeded (last dial to 127.0.0.1:6379: connect:
// connection refused)", still wrapping ErrNotAcquired and ctx.Err(); the
// dial is fencelock's own, to the client's address, not the client's.
// [Client.Close] waits for the background cleanups until its context ends,
// and no longer.
//
// Redis keys, for lock NAME and the default prefix "fencelock:":
//
//	fencelock:{NAME}          "holder:seq", with the lease's ttl
//	fencelock:{NAME}:fence    the counter (expires after WithCounterTTL, 1h by default)
//	fencelock:{NAME}:queue    fair waiters by arrival; expires 2s after the last ticket
//	fencelock:{NAME}:tickets  fair waiters' tickets; likewise
//	fencelock:{NAME}:waiting  "1" while the queue may hold a waiter; likewise
//	fencelock:{NAME}:ahead    "1" while the counter may be above the server's clock
//	fencelock:{NAME}:release  pub/sub channel: a release's wake-up or handoff message
//	                          (a fair release with nobody queued publishes nothing)
//
// # The counter rule
//
// Tokens of one lock never go back because its counter is missing. A
// missing counter (expired, evicted, or lost in a restart without
// persistence) starts again at the Redis server's clock in microseconds,
// and a counter lifted above that clock (by [Client.Advance],
// [Lease.Reissue] or a Redlock write-back) keeps a ttl until the clock has
// passed it. So the next token is above every token issued before,
// whatever lifted the counter and whatever WithCounterTTL each client of
// the lock uses. Tokens look like timestamps: about 1.8e15 today, below
// 2^53. Nothing lifts a counter more than 24h above the server's clock:
// Advance, Reissue (heal.Write) and the Redlock write-back refuse such a
// floor with [ErrPoisoned], since a forged or mistyped high-water there
// would use up the tokens left below 2^53 and retire the lock.
//
// Its limits: the server's clock must not step back by more than the time
// that passed since the counter's last write (a failover to a server whose
// clock is behind, a clock set back by hand); a restart without
// persistence, or an eviction (a counter has a ttl, so volatile-*
// maxmemory policies may evict it), forgets a counter lifted above the
// clock; a failover to a replica that missed the last increments gives a
// counter that exists but is behind ([WithClockFloor] covers that); and
// clients of fencelock from before the rule start a missing counter at 1,
// so upgrade every client of a lock before its counter can expire. The verifier's conflict
// rule keeps the data safe in those cases, and [Client.Advance] or
// heal.Write restores progress. lease/redlock's counters follow the same
// rule on each node. Package lease/doctor (the command's `fencelock
// doctor`) checks a deployment for the settings that reach these limits.
//
// # Waiting, fairness and liveness
//
// A lock whose holder and waiters are all gone is free again within the
// lease's ttl, plus 2s (a fair waiter's ticket lifetime) when a waiter
// died while queued: the lock may be handed to it once. A waiter that
// died never held the lock, and costs the live waiters no more than that
// whatever ttl it asked for: a release hands a fair lock over for a claim
// window of 2s, which a live holder extends to its ttl and a dead one
// never does (see [WithFair]). A waiter that gives up (its context ends)
// leaves the queue in the background; a process that exits right after
// calls [Client.Close] first, so that the lock is not handed to it at all.
package lease
