// Package sqlverifier checks fencing tokens in a database/sql database,
// MySQL, MariaDB or PostgreSQL, in the same transaction as the write they
// protect.
//
//	v, err := sqlverifier.New(db, sqlverifier.MySQL) // after migrations.ApplySQL
//	err = v.WithTx(l.Context(), "accounts/7", l.Token(), func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 7")
//		return err
//	})
//
// Each resource's high-water (the highest token it accepted) and the lock it
// belongs to are a row of the fence_tokens table, created by package
// migrations ([github.com/fencelock/fencelock/migrations.ApplySQL], or the
// files for your migration tool).
// The driver is yours: github.com/go-sql-driver/mysql for [MySQL], a
// database/sql driver such as github.com/jackc/pgx/v5/stdlib for
// [Postgres]. (With pgx itself, package pgverifier does the same without
// database/sql, and can send the guard and a statement in one round trip.)
//
//	db, err := sql.Open("mysql", "app:pw@tcp(db:3306)/app?interpolateParams=true")
//	_, err = migrations.ApplySQL(ctx, db, sqlverifier.MySQL)
//	v, err := sqlverifier.New(db, sqlverifier.MySQL)
//	err = v.WithTx(ctx, "accounts/42", tok, func(tx *sql.Tx) error { ... })
//
// A token is accepted when its Seq is higher than the resource's high-water,
// or equal to it with the same holder, and when it belongs to the lock the
// resource is bound to: the lock of the first token the resource accepted.
// A token of another lock is refused with a *verifier.ForeignError, a stale
// one with a *verifier.StaleError. [Verifier.Move] rebinds a resource.
//
// # Three ways to fence a write
//
//   - [Verifier.WithTx]: begin, guard, run your function with the
//     transaction, commit. The general read-modify-write.
//   - [Verifier.Exec]: begin, guard, one statement, commit.
//   - [Verifier.Guard] in your own transaction, e.g. with another
//     isolation level.
//
// [Verifier.WithTxAll] and [Verifier.GuardAll] do the same for several
// resources in one transaction (a transfer between two accounts, with the
// tokens of package lockset's Set), guarding them in the order of their
// names, so that two transactions never wait for each other's rows.
//
// Each costs one statement, and one round trip, more than the same
// transaction unguarded (database/sql sends one statement per round trip);
// on MySQL a refusal costs two more, and a resource's first use in a
// process one or two (its row is made, committed on its own).
// [Verifier.Claim] runs the guard on its own, committed at once: it raises
// the high-water so that older holders are turned away from then on, but
// it does not by itself fence a write made later in another transaction.
//
// # Round trips, and the fastest pattern
//
// Counted on the wire (TestRoundTrips, one connection, warm), for one
// UPDATE with an argument:
//
//	                                      plain tx   Exec, WithTx   bounded WithTx
//	MariaDB, go-sql-driver default DSN       4            5               7
//	MariaDB, interpolateParams=true          3            4               6
//	PostgreSQL, pgx stdlib                   3            4               5
//
// (Bounded: with the lease's context, see "A paused holder".)
// A plain transaction is BEGIN, the UPDATE and COMMIT. With the mysql
// driver's default DSN, a statement with arguments is prepared, run and
// closed (two round trips; the close needs no answer); with
// interpolateParams=true the driver puts the values in the text itself
// and sends it once. The guard is one round trip either way, with every
// value a bind parameter. On MySQL the verifier prepares its usual
// statement (an UPDATE of the resource's row, below) on its DB, once,
// before its first transaction; its transactions run it through
// [database/sql.Tx.StmtContext], which prepares it on each pooled
// connection the first time and keeps it there, so that each later run is
// one round trip. On a *sql.Conn the statement is the Conn's.
// [Verifier.Guard] runs it the same way in a transaction of the verifier's
// *sql.DB once the verifier has prepared it (Guard itself uses no
// connection but yours), and on the verifier's *sql.Conn; in any other
// transaction it runs unprepared (two round trips on the default DSN).
// The statement stays prepared, on at most every connection of the pool,
// until [Verifier.Close] or until the Verifier is garbage collected. On
// PostgreSQL pgx's stdlib driver prepares the guard once per connection
// and then runs it in one round trip. database/sql cannot send the guard
// and your statement together; package pgverifier can, with pgx.
//
// Measured (BenchmarkGuardOverhead, the five ways interleaved on one
// connection, 2,000–3,000 rounds, four runs on a shared 2-core machine, one
// for PostgreSQL; ratios to the plain transaction): Exec 1.31–1.50×
// (MariaDB, default DSN), 1.44–1.63× (interpolateParams=true, whose plain
// transaction is itself cheaper) and 1.59× (PostgreSQL); WithTx 1.35–1.41×,
// 1.45–1.61× and 1.60×. The fastest pattern on both is the per-row pattern
// below: 1.05–1.17× (MariaDB, default DSN: the longer statement is
// prepared too), 0.99–1.21× (MariaDB, interpolateParams=true) and 1.07×
// (PostgreSQL). `go run ./bench perf -scenarios sql` measures the same as
// sql_unguarded, sql_guarded and sql_perrow.
//
// # Per-row fence columns
//
// When the protected data is one row per resource, the high-water can live
// in that row, with no fence_tokens table and no statement of its own: the
// guard rides in your UPDATE. MySQL and MariaDB:
//
//	ALTER TABLE items ADD COLUMN fence_seq BIGINT UNSIGNED NOT NULL DEFAULT 0,
//	                  ADD COLUMN fence_holder VARBINARY(64) NOT NULL DEFAULT '',
//	                  ADD COLUMN fence_lock VARBINARY(512) NULL;
//
//	UPDATE items SET value = ?, fence_seq = ?, fence_holder = ?, fence_lock = ?
//	WHERE id = ? AND (fence_lock IS NULL OR fence_lock = ?)
//	  AND (fence_seq < ? OR (fence_seq = ? AND fence_holder = ?))
//
// with, in order, the new value, int64(tok.Seq), tok.Holder, tok.Key, the
// row's id, tok.Key, int64(tok.Seq) twice and tok.Holder. PostgreSQL (text
// columns, fence_seq bigint):
//
//	UPDATE items SET value = $5, fence_seq = $2, fence_holder = $3, fence_lock = $4
//	WHERE id = $1 AND (fence_lock IS NULL OR fence_lock = $4)
//	  AND (fence_seq < $2 OR (fence_seq = $2 AND fence_holder = $3))
//
// with $1 the row's id, $2 int64(tok.Seq), $3 tok.Holder, $4 tok.Key and
// $5 the new value. One affected row means accepted. None means refused,
// or no such row, or (MySQL without clientFoundRows, which counts changed
// rows) an UPDATE that changed nothing because the row already held this
// token: read the fence columns with SELECT ... FOR UPDATE in the same
// transaction to tell, and return a *verifier.ForeignError when fence_lock
// is another lock, else a *verifier.StaleError (unless the row holds the
// token itself). The UPDATE checks and writes in one atomic statement,
// but it does not claim before read: compute the new value in the same
// statement (SET value = value + ?), or first run the fenced UPDATE with
// no change but the fence columns in the transaction that then reads and
// writes. On MySQL create the rows before the transactions that fence
// them, committed: a row inserted by a transaction that then rolls back
// makes its waiters deadlock (as for the guard's own row, below). To
// reset a poisoned high-water (see [verifier.Resetter]), set the three
// fence columns: UPDATE items SET fence_seq = ?, fence_holder = ?,
// fence_lock = ? WHERE id = ?. The package's tests run the conformance
// suite on this pattern, with that reset, on MariaDB and PostgreSQL.
//
// # The guard
//
// On PostgreSQL it is package pgverifier's statement (one file, run by
// both), and a refusal is read and explained as pgverifier does:
//
//	INSERT INTO fence_tokens AS f (resource, seq, holder, lock_key, updated_at)
//	VALUES ($1, $2, $3, $4, now())
//	ON CONFLICT (resource) DO UPDATE
//	SET lock_key = excluded.lock_key, seq = ..., holder = ..., updated_at = ...
//	    WHERE (f.lock_key IS NULL OR f.lock_key = excluded.lock_key)
//	      AND (excluded.seq > f.seq OR (excluded.seq = f.seq AND excluded.holder = f.holder))
//	RETURNING seq
//
// which returns a row only when the token is accepted; on a refusal a read
// of the (locked) row tells stale from foreign.
//
// On MySQL and MariaDB the usual case is one UPDATE of the resource's row
// by primary key, with the acceptance rule in its WHERE: one affected row
// means accepted (whatever the clientFoundRows setting). Otherwise (a
// refusal, or a row that does not exist) the full guard follows: an
// INSERT ... ON DUPLICATE KEY UPDATE whose
// every assignment repeats the acceptance rule, in an order (lock_key,
// holder, seq, updated_at) that keeps the rule true after each assignment
// when the token is accepted, so the result is the same whether the server
// evaluates the assignments left to right (MySQL) or all on the old row
// (MariaDB's SIMULTANEOUS_ASSIGNMENT). An affected-rows count of 2 (a row
// changed) proves acceptance, whatever the clientFoundRows setting; any
// other count is followed, in the same transaction, by a SELECT ... FOR
// UPDATE of the locked row: the token was accepted if and only if the row
// now holds it. FOR UPDATE matters: a plain SELECT would read the
// transaction's REPEATABLE READ snapshot, which may predate the row.
//
// Either way the guard locks the row until the transaction ends, so
// concurrent guards of one resource run one after another, and a guard at
// the start of a transaction fences everything the transaction then reads
// and writes.
//
// On MySQL the first guard of a resource in a process first creates the
// resource's row, committed on its own (bound to no lock, no high-water:
// the same as no row). A row inserted by a guarding transaction that then
// rolls back would turn the waiting guards' record locks into gap locks,
// and InnoDB would report deadlocks to them (error 1213).
//
// # Names and values
//
// Every value is a bind parameter; the table name ([WithTable]) is quoted
// for the dialect, and may not contain control characters. The MySQL table stores names as
// VARBINARY, so they compare byte for byte (MariaDB's _bin collations
// ignore trailing spaces). With go-sql-driver/mysql, interpolateParams=true
// in the DSN saves a round trip per statement of yours (the driver then
// escapes values itself); without it each statement with arguments is
// prepared, run and closed.
//
// # A paused holder
//
// A holder frozen inside [Verifier.WithTx] (a GC pause, SIGSTOP, a frozen
// VM) would keep the resource's row locked, and every later holder
// waiting, until it resumes. So when the context given to WithTx,
// WithTxAll, Exec or Claim is the lease's (lease.Lease.Context, lockset's
// Set.Context, or a context derived from one), or has a deadline, the
// server is told to end the transaction once it idles past what is left
// of it; the row lock goes with it, and the frozen holder's commit fails
// when it resumes:
//
//   - PostgreSQL: SET LOCAL idle_in_transaction_session_timeout and
//     statement_timeout, in milliseconds, as the transaction's first
//     statement (one round trip more).
//   - MySQL and MariaDB: the session's wait_timeout, in seconds rounded
//     up, set on the connection before BEGIN and given back its value
//     after the transaction (two round trips more); a pooled connection
//     whose value could not be given back is closed, not reused. On
//     MariaDB, idle_transaction_timeout or idle_write_transaction_timeout,
//     when set above 0, win over it: leave them at 0. MySQL has no
//     idle-in-transaction timeout of its own; this bound is wait_timeout's
//     (tested on MariaDB only).
//
// A context with neither sets no bound and costs nothing. With
// [Verifier.Guard] in your own transaction, set these yourself. The bound
// counts from the BEGIN: a transaction that idles longer than its lease
// had left, even with a keep-alive, is ended too.
//
// # Durability
//
// An accepted token must survive a crash, or a stale holder could be
// accepted after it: keep innodb_flush_log_at_trx_commit=1 (MySQL) or
// synchronous_commit=on (PostgreSQL) for the transactions that guard, and
// fail over only to replicas that had them. Like every fencelock verifier,
// it helps only if every writer of a resource goes through it.
//
// # Trust
//
// The verifier trusts its callers: a token is not a credential, and a
// made-up one with Seq fence.MaxSeq locks the resource's real holders out
// for good. Let only your own services reach it, authenticated (see
// package verifier). [Verifier.Reset] sets a poisoned high-water back.
package sqlverifier
