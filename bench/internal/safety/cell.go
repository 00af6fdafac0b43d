package safety

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// config is the sizes of one run.
type config struct {
	ttl    time.Duration
	rounds int // faulted rounds per cell
	extra  int // unfaulted cycles by B after each round
	runID  string
	dsn    string
	db     *pgxpool.Pool // the checker's pool; also takes the epochs
	status func(topic, detail string)
}

// cell is one lock kind in one scenario.
type cell struct {
	cfg      *config
	sc       scenario
	kind     kind
	ttl      time.Duration
	topo     *topology
	resource string
	// What A dials, set by the fault's links: aDB for Postgres ("" for
	// directly), aRedis for the lock (nil for the topology's addresses).
	aDB     string
	aRedis  []string
	pgProxy *faults.Proxy   // delayed-write: A's Postgres link
	cut     []*faults.Proxy // node faults, quorum kinds: A's own links to the nodes it is partitioned from
	a, b    *worker         // a is nil when A runs as a process
	cycles  []report.Cycle
	closers []func()
}

// onClose registers f to run when the cell ends, in reverse order.
func (c *cell) onClose(f func()) { c.closers = append(c.closers, f) }

func (c *cell) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	if c.topo != nil {
		c.topo.close()
	}
}

// heal ends A's partition.
func (c *cell) heal() {
	for _, px := range c.cut {
		px.Restore()
	}
}

// runCell runs every round of one lock kind in one scenario and checks the
// data.
func runCell(ctx context.Context, cfg *config, sc scenario, k kind) report.SafetyResult {
	start := time.Now()
	res := report.SafetyResult{Scenario: sc.info.Name, Lock: k.Name}
	c := &cell{cfg: cfg, sc: sc, kind: k, ttl: cfg.ttl,
		resource: fmt.Sprintf("safety-%s-%s-%s", cfg.runID, sc.info.Name, k.Name)}
	err := c.run(ctx)
	c.close()
	t, cerr := checkResource(context.WithoutCancel(ctx), cfg.db, c.resource, c.cycles)
	res.Ops, res.Acked, res.Rejected, res.Failed = t.ops, t.acked, t.rejected, t.failed
	res.LostUpdates, res.StaleAccepted, res.Overlaps = t.lost, t.stale, t.overlaps
	res.Anomalies = t.lost + t.stale
	res.Cycles = c.cycles
	for _, cy := range c.cycles {
		if cy.Healed {
			res.Healed++
		}
	}
	if err = errors.Join(err, cerr); err != nil {
		res.Error = err.Error()
	}
	res.Seconds = math.Round(time.Since(start).Seconds()*1000) / 1000
	return res
}

func (c *cell) run(ctx context.Context) (err error) {
	c.topo, err = startTopology(ctx, c.kind.Nodes, c.sc.failover())
	if err != nil {
		return fmt.Errorf("starting redis: %w", err)
	}
	if err := newResource(ctx, c.cfg.db, c.resource); err != nil {
		return err
	}
	if c.b, err = c.worker(ctx, "B", "", c.topo.addrs()); err != nil {
		return err
	}
	if c.sc.a != sigstop {
		if err := c.sc.fault.links(ctx, c); err != nil {
			return err
		}
		addrs := c.aRedis
		if addrs == nil {
			addrs = c.topo.addrs()
		}
		if c.a, err = c.worker(ctx, "A", c.aDB, addrs); err != nil {
			return err
		}
	}
	for r := 1; r <= c.cfg.rounds; r++ {
		c.cfg.status(fmt.Sprintf("%-13s %-25s", c.sc.info.Name, c.kind.Name), fmt.Sprintf("round %d/%d", r, c.cfg.rounds))
		if err := c.round(ctx, r); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		for range c.cfg.extra {
			c.cycles = append(c.cycles, c.b.run(ctx, time.Time{}, nil))
		}
	}
	return nil
}

// worker makes holder id's worker: a client of the cell's kind on the
// Redis servers at addrs, and a Postgres pool through viaDB ("" for
// directly). Both are closed with the cell.
func (c *cell) worker(ctx context.Context, id, viaDB string, addrs []string) (*worker, error) {
	k, err := newClient(c.kind, addrs, c.ttl)
	if err != nil {
		return nil, err
	}
	c.onClose(k.close)
	p, err := newPool(ctx, c.cfg.dsn, viaDB)
	if err != nil {
		return nil, err
	}
	c.onClose(p.Close)
	return newWorker(id, k, p, c.cfg.db, c.resource)
}

// newPool opens a small pool to dsn, through addr when it is not "".
func newPool(ctx context.Context, dsn, addr string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	if addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		p, _ := strconv.Atoi(port)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
		cfg.ConnConfig.Fallbacks = nil
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// pgAddr is the TCP address of the PostgreSQL in dsn.
func pgAddr(dsn string) (string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	h := cfg.ConnConfig.Host
	if strings.HasPrefix(h, "/") {
		return "", fmt.Errorf("the delayed-write scenario needs PostgreSQL over TCP, not the socket %s", h)
	}
	return net.JoinHostPort(h, strconv.Itoa(int(cfg.ConnConfig.Port))), nil
}
