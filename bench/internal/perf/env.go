package perf

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/servers"
	"github.com/fencelock/fencelock/internal/testenv"
)

// env is the servers and clients of one run.
type env struct {
	single   redis.UniversalClient   // for the single-node locks
	many     []redis.UniversalClient // independent masters for the quorum locks
	dsn      string                  // PostgreSQL; "" when the pg and sql scenarios are off
	mysqlDSN string                  // MariaDB or MySQL; "" when the sql scenario is off
	redisVer string
	where    string // "throwaway" or "given" servers, for the report
	given    []redis.UniversalClient
	closers  []func()

	// singleOpt and manyOpt are how single and many were dialled, for
	// fresh clients (waiters) and for the non-go-redis peers (rueidislock).
	singleOpt redis.Options
	manyOpt   []redis.Options
}

func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// cleanup deletes this run's keys from servers the user gave (throwaway
// servers go away anyway).
func (e *env) cleanup(runID string) {
	for _, c := range e.given {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, "*bench-"+runID+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			c.Del(ctx, keys[:n]...)
			keys = keys[n:]
		}
	}
}

// clients returns the run's shared clients.
func (e *env) clients() locks.Clients {
	return locks.Clients{Single: e.single, Many: e.many, SingleOpt: e.singleOpt}
}

// serversOf returns the clients of l's servers: the single-node server,
// or the first l.Nodes of the independent ones.
func (e *env) serversOf(l *locks.Lock) []redis.UniversalClient {
	if l.Nodes > 1 && l.Nodes <= len(e.many) {
		return e.many[:l.Nodes]
	}
	return []redis.UniversalClient{e.single}
}

// fresh returns new clients on the same servers, every connection of which
// is named name (CLIENT SETNAME), so that CLIENT LIST can tell them apart,
// and a func that closes them. go-redis dials lazily: an unused client
// costs no connection.
func (e *env) fresh(name string) (locks.Clients, func()) {
	named := func(o redis.Options) *redis.Options {
		o.ClientName = name
		return &o
	}
	c := locks.Clients{SingleOpt: e.singleOpt, Name: name}
	single := redis.NewClient(named(e.singleOpt))
	closers := []func() error{single.Close}
	c.Single = single
	for _, o := range e.manyOpt {
		n := redis.NewClient(named(o))
		c.Many = append(c.Many, n)
		closers = append(closers, n.Close)
	}
	return c, func() {
		for _, f := range closers {
			_ = f()
		}
	}
}

// clientOptions tunes every client alike: ContextTimeoutEnabled and no
// command retries, which lease/redlock requires of its nodes for its
// per-node timeouts.
func clientOptions(o *redis.Options) *redis.Options {
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	return o
}

// setup connects to the given servers or starts throwaway ones: one Redis
// for the single-node locks, five independent ones when a quorum lock is
// wanted (unless five URLs were given), PostgreSQL when pg is wanted.
// server is the binary of the throwaway Redises ("" for testenv's default).
func setup(ctx context.Context, server, redisURLs, dbURL, mysqlDSN string, locks []string, pg, mysql bool) (*env, error) {
	e := &env{where: "throwaway"}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	needMany := false
	for _, l := range locks {
		needMany = needMany || strings.HasSuffix(l, "-3") || strings.HasSuffix(l, "-5")
	}

	// PostgreSQL's initdb takes a few seconds: start it beside the Redises.
	var pgErr error
	var pgClose func()
	var wg sync.WaitGroup
	if pg {
		if dbURL != "" {
			e.dsn = dbURL
		} else {
			wg.Go(func() {
				var p *testenv.Postgres
				p, pgErr = testenv.StartPostgres(ctx)
				if pgErr == nil {
					e.dsn = p.DSN()
					pgClose = func() { p.Close() }
				}
			})
		}
	}
	var myErr error
	var myClose func()
	if mysql {
		if mysqlDSN != "" {
			e.mysqlDSN = mysqlDSN
		} else {
			wg.Go(func() {
				var m *testenv.MariaDB
				m, myErr = testenv.StartMariaDB(ctx)
				if myErr == nil {
					e.mysqlDSN = m.DSN()
					myClose = func() { m.Close() }
				}
			})
		}
	}
	err := e.setupRedis(ctx, server, redisURLs, needMany)
	wg.Wait()
	if pgClose != nil {
		e.closers = append(e.closers, pgClose)
	}
	if myClose != nil {
		e.closers = append(e.closers, myClose)
	}
	if myErr != nil && err == nil {
		err = fmt.Errorf("mariadb: %w (set -mysql-dsn, or leave out -scenarios sql)", myErr)
	}
	if err != nil {
		return nil, err
	}
	if pgErr != nil {
		return nil, fmt.Errorf("postgres: %w (set -database-url, or leave out -scenarios pg)", pgErr)
	}
	srv, err := servers.Identify(ctx, e.single)
	if err != nil {
		return nil, err
	}
	e.redisVer = srv.String()
	ok = true
	return e, nil
}

func (e *env) setupRedis(ctx context.Context, server, redisURLs string, needMany bool) error {
	var urls []string
	var opts []redis.Options // of urls, before redis.NewClient fills them in
	for _, u := range strings.Split(redisURLs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	for _, u := range urls {
		opt, err := redis.ParseURL(u)
		if err != nil {
			if strings.Contains(u, "@") || strings.Contains(u, "password") { // the parser's error may quote the password
				return fmt.Errorf("redis url %s: not a valid URL", redactURL(u))
			}
			return fmt.Errorf("redis url %q: %w", u, err)
		}
		opt = clientOptions(opt)
		opts = append(opts, *opt)
		c := redis.NewClient(opt)
		e.closers = append(e.closers, func() { c.Close() })
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis %s: %w", redactURL(u), err)
		}
		e.given = append(e.given, c)
	}
	switch {
	case len(urls) > 0:
		e.single, e.singleOpt = e.given[0], opts[0]
		e.where = "given"
		if len(urls) >= 5 {
			e.many, e.manyOpt = e.given[:5], opts[:5]
		}
	default:
		r, err := testenv.StartRedis(ctx, testenv.RedisOptions{Server: server})
		if err != nil {
			return fmt.Errorf("starting redis-server: %w (or set -redis-url)", err)
		}
		opt := clientOptions(r.Options())
		e.singleOpt = *opt
		c := redis.NewClient(opt)
		e.closers = append(e.closers, func() { c.Close(); r.Close() })
		e.single = c
	}
	if needMany && len(e.many) == 0 {
		rs, err := testenv.StartRedisN(ctx, 5, testenv.RedisOptions{Server: server})
		if err != nil {
			return fmt.Errorf("starting 5 redis-servers for the quorum locks: %w", err)
		}
		for _, r := range rs {
			opt := clientOptions(r.Options())
			e.manyOpt = append(e.manyOpt, *opt)
			c := redis.NewClient(opt)
			e.closers = append(e.closers, func() { c.Close(); r.Close() })
			e.many = append(e.many, c)
		}
		if len(urls) > 0 {
			e.where = "given (single-node locks); throwaway (quorum locks)"
		}
	}
	return nil
}

// redactURL is u without its password (user info and a password
// parameter), for messages; a URL that does not parse is not printed.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if q := p.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		p.RawQuery = q.Encode()
	}
	return p.Redacted()
}
