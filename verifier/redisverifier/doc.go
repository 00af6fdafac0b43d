// Package redisverifier fences data kept in Redis: a write lands only if its
// fencing token is accepted by the resource's high-water, and the check,
// the write and the raise of the high-water are one Lua script, so nothing
// can run between them.
//
//	v, err := redisverifier.New(rdb)
//	err = v.Set(ctx, "config/flags", l.Token(), "config:flags", data, 0) // SET only if the token holds
//
// The high-water of resource R is the hash PREFIX+R {seq, holder, lock} (see
// [WithPrefix]). A resource is bound to the lock of the first token it
// accepts; a token of another lock is refused with a
// *verifier.ForeignError, and [Verifier.Move] moves a resource to another
// lock. A hash written by an older version has no lock and adopts the lock
// of the next token it accepts. The built-in writes are [Verifier.Set] and [Verifier.HSet];
// [Verifier.NewScript] fences a write of your own, written in Lua at
// construction time. [Verifier.Claim] raises the high-water with no write,
// to claim a resource before reading it.
//
// # When not to use it
//
// Use it when the protected data itself lives in Redis. The high-water is
// only as durable as that Redis: a restart without persistence, a failover
// to a replica that lagged, or eviction can lose it. Losing it together
// with the data it guards is mostly harmless (both go back in time); losing
// it alone re-opens the door to stale writes. So run this Redis with
// persistence (appendonly yes), maxmemory-policy noeviction (or a volatile-*
// policy: high-water keys have no TTL), and, if you can, not on the same
// Redis that hands out the leases, whose counters must not go back with it.
//
// # Redis Cluster
//
// A script may only touch keys of one slot. Put a hash tag in the resource
// name and use the same tag in the data keys: resource "{user:42}" with data
// key "{user:42}:profile" share a slot, and so do the high-water key
// "fencelock:hw:{user:42}" and the data.
//
// # Trust
//
// The verifier trusts its callers: a token is not a credential, and a
// made-up one with Seq fence.MaxSeq locks the resource's real holders out
// for good. Let only your own services reach it, authenticated (see
// package verifier). [Verifier.Reset] sets a poisoned high-water back.
package redisverifier
