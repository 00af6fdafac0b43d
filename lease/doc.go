// Package lease is a lock lease on Redis that hands out fencing tokens.
//
// Each acquisition is one atomic Lua script: if the lock key is free it
// increments the lock's counter and sets the key (holder id and Seq) with a
// PX ttl, and returns the new Seq as a [fence.Token]. Tokens of one lock name
// grow with every acquisition, so the protected storage can reject a write
// from a holder whose lease has passed on (see package verifier). Without
// that check, a lease is an efficiency lock only: a holder that pauses (GC,
// page fault, SIGSTOP) past its ttl keeps writing as if it still held it.
//
// A [Client] works on a standalone Redis, through Sentinel or on a Redis
// Cluster (any redis.UniversalClient): the keys of one lock share a hash
// slot. [Client.TryAcquire] tries once; [Client.Acquire] waits, woken by a
// pub/sub message on release. A [Lease] keeps a local deadline on the
// monotonic clock and closes [Lease.Done] (and cancels [Lease.Context]) when
// it passes, when a refresh finds the lock gone, or on release;
// [WithKeepAlive] refreshes it in the background. Every lease kind — this
// one and lease/redlock's — shares that lifetime and satisfies [Interface].
//
// No call outlives its context: give the go-redis client
// ContextTimeoutEnabled: true (see [New]), and every call returns by its
// context's deadline; cleanup after a lost reply runs in the background.
//
// Redis keys, for lock NAME and the default prefix "fencelock:":
//
//	fencelock:{NAME}          "holder:seq", with the lease's ttl
//	fencelock:{NAME}:fence    the counter (never expires unless WithCounterTTL)
//	fencelock:{NAME}:release  pub/sub channel, one message per release
//
// Redis replication is asynchronous and a Redis without persistence forgets
// the counter on restart, so a counter can go backwards. The verifier's
// conflict rule keeps the data safe then; [Client.Advance] and
// [WithClockFloor] restore progress.
package lease
