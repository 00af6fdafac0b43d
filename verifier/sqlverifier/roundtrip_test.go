package sqlverifier_test

import (
	"context"
	"database/sql"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// turnCounter is a TCP proxy that counts round trips on the wire: a turn
// is the server answering after the client spoke. Statements the client
// sends without waiting for an answer (MySQL's COM_STMT_CLOSE, a pipeline)
// count with the next answer, as they cost no round trip of their own.
type turnCounter struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	spoke  bool // the client sent something since the server last answered
	turns  int
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// newTurnCounter proxies 127.0.0.1:0 to target until the test ends.
func newTurnCounter(t testing.TB, target string) *turnCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &turnCounter{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *turnCounter) addr() string { return p.ln.Addr().String() }

// take returns the turns counted since the last take.
func (p *turnCounter) take() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.turns
	p.turns = 0
	return n
}

func (p *turnCounter) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(s, c, true)
		go p.pump(c, s, false)
	}
}

// pump copies src to dst; toServer says which way, for the count.
func (p *turnCounter) pump(dst, src net.Conn, toServer bool) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if toServer {
				p.spoke = true // before the server can see it
			} else if p.spoke {
				p.spoke = false
				p.turns++
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF, or closed: the other side's pump ends too
			return
		}
	}
}

func (p *turnCounter) close() {
	p.mu.Lock()
	p.closed = true
	cs := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range cs {
		c.Close()
	}
	p.wg.Wait()
}

// viaProxy returns tg's DSN with the server address replaced by addr, and
// the server address.
func (tg target) viaProxy(t testing.TB) (dsn, server string) {
	t.Helper()
	var rest string
	switch tg.d {
	case sqlverifier.MySQL: // user@tcp(host:port)/db?...
		i, j := strings.Index(tg.dsn, "tcp("), strings.Index(tg.dsn, ")/")
		require.True(t, i >= 0 && j > i, "DSN %q", tg.dsn)
		server, rest = tg.dsn[i+4:j], tg.dsn[j:]
		return tg.dsn[:i+4] + "%s" + rest, server
	default: // postgres://user@host:port/db?...
		i := strings.Index(tg.dsn, "@")
		j := strings.Index(tg.dsn[i:], "/") + i
		require.True(t, i >= 0 && j > i, "DSN %q", tg.dsn)
		server, rest = tg.dsn[i+1:j], tg.dsn[j:]
		return tg.dsn[:i+1] + "%s" + rest, server
	}
}

// TestRoundTrips counts, on the wire, the round trips of one fenced write
// on one connection once warm (the resource's row exists, statements are
// cached): Exec and WithTx, and on a pool Guard in the caller's
// transaction, may cost at most one more than the same UPDATE in a plain
// transaction (begin, UPDATE, commit); WithTx bounded by its context's
// deadline (see Verifier.WithTx) one more on PostgreSQL, two on MySQL.
func TestRoundTrips(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		pattern, server := tg.viaProxy(t)
		px := newTurnCounter(t, server)
		db, err := sql.Open(tg.driver, strings.Replace(pattern, "%s", px.addr(), 1))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1) // one session: the Conn subtest takes it from the pool
		update := createBenchTables(t, tg, db)
		for _, name := range []string{"DB", "Conn"} {
			t.Run(name, func(t *testing.T) {
				var on sqlverifier.DB = db
				if name == "Conn" {
					c, err := db.Conn(ctx)
					require.NoError(t, err)
					defer c.Close()
					on = c
				}
				v := tg.verifier(t, on)
				res := "rt/" + t.Name()
				var seq uint64
				shapes := []struct {
					name string
					fn   func() error
				}{
					{"plain", func() error { return plain(ctx, on, update) }},
					{"Exec", func() error {
						seq++
						_, err := v.Exec(ctx, res, tok("rt", seq, "h"), update, 1)
						return err
					}},
					{"WithTx", func() error {
						seq++
						return v.WithTx(ctx, res, tok("rt", seq, "h"), func(tx *sql.Tx) error {
							_, err := tx.ExecContext(ctx, update, 1)
							return err
						})
					}},
					{"WithTx, bounded", func() error {
						seq++
						ctx, cancel := context.WithTimeout(ctx, time.Minute) // as a lease's context bounds it
						defer cancel()
						return v.WithTx(ctx, res, tok("rt", seq, "h"), func(tx *sql.Tx) error {
							_, err := tx.ExecContext(ctx, update, 1)
							return err
						})
					}},
				}
				if name == "DB" { // a caller's transaction on a Conn may be another session's
					shapes = append(shapes, struct {
						name string
						fn   func() error
					}{"Guard", func() error {
						seq++
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						defer tx.Rollback()
						if err := v.Guard(ctx, tx, res, tok("rt", seq, "h")); err != nil {
							return err
						}
						if _, err := tx.ExecContext(ctx, update, 1); err != nil {
							return err
						}
						return tx.Commit()
					}})
				}
				// The median of 11 writes: a driver's liveness ping before
				// one of them (pgx pings a connection idle for over a second)
				// is no round trip of the write.
				const n = 11
				turns := map[string]int{}
				for _, s := range shapes {
					for range 3 { // warm: the row, the statement caches
						require.NoError(t, s.fn(), s.name)
					}
					each := make([]int, n)
					for i := range each {
						px.take()
						require.NoError(t, s.fn(), s.name)
						each[i] = px.take()
					}
					slices.Sort(each)
					turns[s.name] = each[n/2]
				}
				t.Logf("round trips per write: %v", turns)
				require.Positive(t, turns["plain"])
				for _, s := range shapes[1:] {
					if s.name == "WithTx, bounded" {
						// The bound costs a statement on PostgreSQL; on MySQL
						// one before the transaction and one after it.
						more := 1
						if tg.d == sqlverifier.MySQL {
							more = 2
						}
						require.Equal(t, turns["WithTx"]+more, turns[s.name], s.name)
						continue
					}
					require.LessOrEqual(t, turns[s.name], turns["plain"]+1, s.name)
				}
			})
		}
	})
}
