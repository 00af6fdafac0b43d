package sqlverifier

import (
	"context"
	"database/sql"
	"sync"
)

// prepared is the MySQL guard's fast path (mysql/update.sql) as a
// statement prepared on the verifier's DB, so that it costs one round trip
// where go-sql-driver/mysql's default DSN (no interpolateParams) would
// prepare, run and close it: two. Its values stay bind parameters.
//
// On a *sql.DB the statement is the DB's, and a transaction of that DB runs
// it through [sql.Tx.StmtContext]: database/sql prepares it on a pooled
// connection the first time that connection runs it and keeps it there
// (the parent statement's per-connection list), so each later run on that
// connection is one round trip. On a *sql.Conn the statement is the Conn's
// and runs on it, in whatever transaction the session is in.
//
// It is prepared before a transaction of the verifier's own begins (never
// with a connection taken while one is held: a pool of one would wait for
// itself), and closed by [Verifier.Close], or when the Verifier is garbage
// collected. A DB that is neither a *sql.DB nor a *sql.Conn gets none: the
// guard then runs through ExecContext.
type prepared struct {
	query string
	db    *sql.DB   // the verifier's DB, or nil
	conn  *sql.Conn // the verifier's Conn, or nil

	mu     sync.Mutex
	stmt   *sql.Stmt
	fails  int // preparations that failed with their context alive
	closed bool
}

// maxFails is how many failed preparations make the verifier give up on
// preparing (a server or proxy that refuses prepared statements); the
// guard then runs unprepared, through ExecContext.
const maxFails = 3

// newPrepared returns the fast path of query on db; nil when db can hold
// no prepared statement.
func newPrepared(db DB, query string) *prepared {
	switch db := db.(type) {
	case *sql.DB:
		return &prepared{query: query, db: db}
	case *sql.Conn:
		return &prepared{query: query, conn: db}
	}
	return nil
}

// prepare prepares the statement if it is not yet: once per verifier. On
// a failure the guard runs unprepared, and reports the database's error if
// it has one to report; the next call tries again, up to maxFails times.
func (p *prepared) prepare(ctx context.Context) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stmt != nil || p.closed || p.fails >= maxFails {
		return
	}
	var err error
	if p.db != nil {
		p.stmt, err = p.db.PrepareContext(ctx, p.query)
	} else {
		p.stmt, err = p.conn.PrepareContext(ctx, p.query)
	}
	if err != nil {
		p.stmt = nil
		if ctx.Err() == nil {
			p.fails++
		}
	}
}

// get returns the statement, or nil when it is not prepared.
func (p *prepared) get() *sql.Stmt {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stmt
}

// close closes the statement; later guards run unprepared.
func (p *prepared) close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	stmt := p.stmt
	p.stmt, p.closed = nil, true
	p.mu.Unlock()
	if stmt == nil {
		return nil
	}
	return stmt.Close()
}

// errOtherDB is the text of database/sql's error for a statement of
// another *sql.DB given to Tx.StmtContext (it has no variable to match
// with errors.Is). TestGuardOtherDB fails if the text changes.
const errOtherDB = "sql: Tx.Stmt: statement from different database used"

// exec runs the statement with args on q, and reports whether it could:
// false (and nothing run) when q cannot run it. own says q is a
// transaction the verifier began on its DB.
func (p *prepared) exec(ctx context.Context, q Querier, own bool, args ...any) (sql.Result, bool, error) {
	if c, ok := q.(*sql.Conn); ok && p != nil && c == p.conn {
		p.prepare(ctx) // on q's own session
	}
	stmt := p.get()
	if stmt == nil {
		return nil, false, nil
	}
	switch q := q.(type) {
	case *sql.Tx:
		if p.conn != nil {
			if !own { // perhaps a transaction of another session
				return nil, false, nil
			}
			// The verifier's Conn is in q: its statement runs there, in
			// q's transaction. (A Conn.Close racing with this call, which
			// waits for q to end, can make it wait for ctx to end.)
			res, err := stmt.ExecContext(ctx, args...)
			return res, true, err
		}
		// A transaction of the verifier's DB, or of another one: then
		// StmtContext returns a statement that fails at once, with no I/O,
		// and the guard runs unprepared.
		res, err := q.StmtContext(ctx, stmt).ExecContext(ctx, args...)
		if err != nil && !own && err.Error() == errOtherDB {
			return nil, false, nil
		}
		return res, true, err
	case *sql.Conn:
		if q == p.conn {
			res, err := stmt.ExecContext(ctx, args...)
			return res, true, err
		}
	}
	return nil, false, nil
}
