// Package pgverifier checks fencing tokens in PostgreSQL, in the same
// transaction as the write they protect.
//
//	v, err := pgverifier.New(pool) // after migrations.Apply(ctx, pool)
//	err = v.WithTx(l.Context(), "accounts/7", l.Token(), func(tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 7")
//		return err
//	})
//
// Each resource's high-water (the highest token it accepted, and the lock
// it belongs to) is a row of the fence_tokens table, created by package
// migrations. The guard is one statement,
//
//	INSERT INTO fence_tokens AS f (resource, seq, holder, lock_key, updated_at) VALUES ($1, $2, $3, $4, now())
//	ON CONFLICT (resource) DO UPDATE SET seq = excluded.seq, holder = excluded.holder, ...
//	    WHERE (f.lock_key IS NULL OR f.lock_key = excluded.lock_key)
//	      AND (excluded.seq > f.seq OR (excluded.seq = f.seq AND excluded.holder = f.holder))
//	RETURNING seq
//
// which returns a row only when the token is accepted. It is safe under READ
// COMMITTED: the row lock makes concurrent guards of one resource wait for
// each other, and each sees the latest high-water. It locks the row until
// the transaction ends, so a guard at the start of a transaction fences
// everything the transaction then reads and writes.
//
// # One lock per resource
//
// A resource is bound to the lock (fence.Token.Key) of the first token it
// accepts; a token of another lock is refused with a
// *verifier.ForeignError, whatever its Seq, because Seqs of different
// locks come from different counters. Rows written before migration 000002
// have no lock and adopt the lock of the next token they accept. To move a
// resource to another lock, stop the old lock's users and call
// [Verifier.Move].
//
// # Three ways to fence a write
//
//   - [Verifier.WithTx]: begin, guard, run your function with the
//     transaction, commit. The general read-modify-write; one round trip more
//     than the same transaction unguarded.
//   - [Verifier.Exec]: one statement, sent together with the guard, so it
//     costs no round trip more than the statement alone in a transaction.
//   - [Verifier.Guard] in your own transaction, e.g. with another
//     isolation level.
//
// [Verifier.WithTxAll] and [Verifier.GuardAll] do the same for several
// resources in one transaction (a transfer between two accounts, with the
// tokens of package lockset's Set), guarding them in the order of their
// names, so that two transactions never wait for each other's rows.
//
// [Verifier.Claim] runs the guard on its own, committed at once: it raises
// the high-water so that older holders are turned away from then on, but it
// does not by itself fence a write made later in another transaction.
//
// # Per-row fence columns
//
// When the protected data is one row per resource, the high-water can live
// in the row itself, with no fence_tokens table and no extra statement:
//
//	ALTER TABLE items ADD COLUMN fence_seq bigint NOT NULL DEFAULT 0,
//	                  ADD COLUMN fence_holder text NOT NULL DEFAULT '',
//	                  ADD COLUMN fence_lock text;
//
//	UPDATE items SET value = $5, fence_seq = $2, fence_holder = $3, fence_lock = $4
//	WHERE id = $1 AND (fence_lock IS NULL OR fence_lock = $4)
//	  AND (fence_seq < $2 OR (fence_seq = $2 AND fence_holder = $3))
//
// with $1 the row's id, $2 int64(tok.Seq), $3 tok.Holder, $4 tok.Key and
// $5 the new value. One row affected means accepted; none means the token is refused (or the row
// does not exist): read the fence columns to tell which, and return a
// *verifier.ForeignError{Resource, Token, Lock} when fence_lock is another
// lock, else a *verifier.StaleError{Resource, Token, Highest, HighestHolder}. The UPDATE
// checks and writes in one statement, but it does not claim before read: a
// read-modify-write must compute the new value in the same statement
// (SET value = value + $5, $5 then the amount) or first run the fenced
// UPDATE with no change but the fence columns, in the transaction that then
// reads and writes. To reset a poisoned high-water (see
// [verifier.Resetter]), set the three fence columns: UPDATE items SET
// fence_seq = $2, fence_holder = $3, fence_lock = $4 WHERE id = $1.
//
// # Round trips, and the fastest pattern
//
// A plain transaction (BEGIN, one UPDATE, COMMIT) is three round trips.
// [Verifier.Exec] is three as well (the guard and the statement go out
// together), [Verifier.WithTx] four, and the per-row UPDATE in a
// transaction three. Measured with BenchmarkGuardOverhead (the four ways
// interleaved on one connection, the same UPDATE with one argument, 3,000
// rounds, two runs on a shared 2-core machine), as ratios to the plain
// transaction: WithTx 1.52–1.61×, Exec 1.30–1.33× (no round trip more,
// but the guard's own work on the server), per-row 1.03–1.06×. `go run
// ./bench perf -scenarios pg` measures the same as pg_unguarded,
// pg_guarded, pg_guarded_withtx and pg_perrow. The fastest is the per-row
// pattern when the data is one row per resource; otherwise Exec, for a
// write that needs no read in Go first.
//
// # A paused holder
//
// A holder frozen inside [Verifier.WithTx] (a GC pause, SIGSTOP, a frozen
// VM) would keep the resource's row locked, and every later holder
// waiting, until it resumes. So when the context given to WithTx,
// WithTxAll or Exec is the lease's (lease.Lease.Context, lockset's
// Set.Context, or a context derived from one), or has a deadline, the
// transaction begins with
//
//	SET LOCAL idle_in_transaction_session_timeout = <ms left>; SET LOCAL statement_timeout = <ms left>
//
// in the BEGIN itself (no round trip more): the server closes the session
// of a transaction that idles, or runs one statement, past what was left
// of the lease, the row lock goes with it, and the frozen holder's commit
// fails when it resumes. A context with neither sets no bound, nor does a
// DB without BeginTx (a pgx.Tx); with [Verifier.Guard] in your own
// transaction, set them yourself. The bound counts from the BEGIN: a
// transaction that idles longer than its lease had left, even with a
// keep-alive, is ended too.
//
// # Durability
//
// An accepted token must survive a crash, or a stale holder could be
// accepted after it. Keep synchronous_commit on for the transactions that
// guard, and fail over only to a synchronous standby. Like every fencelock
// verifier, it helps only if every writer of a resource goes through it.
//
// # Trust
//
// The verifier trusts its callers: a token is not a credential, and a
// made-up one with Seq fence.MaxSeq locks the resource's real holders out
// for good. Let only your own services reach it, authenticated (see
// package verifier). [Verifier.Reset] sets a poisoned high-water back.
package pgverifier
