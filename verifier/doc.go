// Package verifier is the resource side of fencelock: it rejects writes that
// carry a fencing token older than one the resource has already accepted.
//
//	var v verifier.Memory // resources that live in this process
//	err := v.Do(ctx, "cache/users", l.Token(), func() error {
//		cache["users"] = users // runs only if no newer token was accepted
//		return nil
//	})
//
// A lease (package lease) hands each holder a [fence.Token] whose Seq grows
// with every acquisition. A lease alone cannot stop a holder that paused
// past its TTL (a GC pause, a page fault, SIGSTOP, a delayed packet) from
// writing after the lock passed to someone else; only the storage can, by
// remembering the highest token it has accepted for each resource (its
// high-water) and refusing anything older. That is what a verifier does.
//
// # The acceptance rule
//
// Against a resource's high-water (Seq, Holder), a token is accepted when
//
//	tok.Seq > high.Seq, or tok.Seq == high.Seq && tok.Holder == high.Holder
//
// (fence.Token.Supersedes). The same Seq from another holder is a conflict,
// not a tie: it means the lock's counter went backwards (a Redis failover or
// restart), and the second holder is rejected. Such a rejection is a
// *[StaleError] (errors.Is(err, [ErrStale])) that carries the resource's
// highest Seq, so the caller can lift the lock's counter past it and retry.
//
// # One lock per resource
//
// Seqs of different locks come from different counters and do not compare.
// A verifier binds each resource to the lock (fence.Token.Key) of the first
// token it accepts, and refuses tokens of other locks with a
// *[ForeignError] (errors.Is(err, [ErrForeign])), whatever their Seq.
// Moving a resource to another lock is an explicit step: [Mover].
//
// # Check and write in one step, and claim before read
//
// A check followed by a separate write is the bug fencing exists to prevent:
// the holder can pause between the two. Every verifier therefore offers a
// step that checks and writes atomically: [Memory.Do] here, a transaction
// helper in pgverifier, a fenced Lua script in redisverifier.
//
// For a read-modify-write, claim first: raise the high-water before reading
// (or read inside the transaction that holds the high-water row). Otherwise
// an older holder that read before a newer one wrote can still pass its own
// check and overwrite the newer write with a value computed from stale data.
//
// # Which verifier
//
//   - [Memory]: resources inside one process; forgets on exit.
//   - [NewMiddleware]: an HTTP handler in front of a storage service; answers
//     409 Conflict to stale tokens, 400 to malformed ones.
//   - pgverifier: PostgreSQL, with the guard in the caller's transaction.
//   - redisverifier: data kept in Redis, written by one fenced Lua script.
//   - sqlverifier: MySQL, MariaDB or PostgreSQL through database/sql.
//   - your own store: prove it with the conformance kit, package
//     verifiertest.
//
// A verifier only helps if every writer of the resource goes through it.
//
// # A token is not a credential
//
// A verifier trusts its callers: it checks a token's order, not who sent
// it. Anyone who can reach it can present a made-up token, and one with
// Seq fence.MaxSeq locks every real holder of the resource out for good
// (no counter can pass it; heal cannot help). A bug can do the same, with
// a token of another deployment. So put it where only your own services
// reach it: authenticate the caller (mTLS, a service token, the database's
// own users) before a token is read, and take tokens only from your own
// lease holders, never from end users. If a high-water was poisoned
// anyway, an operator sets it back with [Resetter] (every fencelock
// verifier has Reset; the command: fencelock reset-highwater).
package verifier
