package safety

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// fault is what takes holder A's lock away while A is held up.
type fault interface {
	// links sets up A's connections, once per cell, before A's client is
	// made.
	links(ctx context.Context, c *cell) error
	// before runs each round before A acquires.
	before(ctx context.Context, c *cell) error
	// inject takes A's lock away while A is held up before its write.
	inject(ctx context.Context, c *cell, a *holderA) error
	// after runs each round once both holders are done.
	after(ctx context.Context, c *cell) error
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expiry is time alone: A stays held up until its TTL has run out on the
// server.
type expiry struct{}

func (expiry) links(context.Context, *cell) error  { return nil }
func (expiry) before(context.Context, *cell) error { return nil }
func (expiry) after(context.Context, *cell) error  { return nil }

func (expiry) inject(ctx context.Context, c *cell, _ *holderA) error {
	return sleep(ctx, c.ttl+margin(c.ttl))
}

// delayedWrite lets A write at once, through its own Postgres link, which
// holds the write back for 2×TTL.
type delayedWrite struct{}

func (delayedWrite) links(ctx context.Context, c *cell) error {
	pg, err := pgAddr(c.cfg.dsn)
	if err != nil {
		return err
	}
	px, err := faults.StartProxy(pg)
	if err != nil {
		return err
	}
	c.onClose(func() { px.Close() })
	c.pgProxy, c.aDB = px, px.Addr()
	return nil
}

func (delayedWrite) before(context.Context, *cell) error { return nil }

func (delayedWrite) inject(ctx context.Context, c *cell, a *holderA) error {
	c.pgProxy.Delay(2 * c.ttl)
	a.proceed()
	if a.ended {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.ttl)
	defer cancel()
	return c.pgProxy.WaitHeld(wctx, 1)
}

func (delayedWrite) after(_ context.Context, c *cell) error {
	c.pgProxy.Delay(0)
	return nil
}

// nodeFault hits one Redis node. The quorum kinds then get Kleppmann's
// partition: A acquires while it cannot reach two of the five nodes, so it
// holds exactly three, and the fault hits one of those three, leaving
// three free nodes for B.
type nodeFault struct {
	failover bool // the node is a primary with a replica behind a virtual IP
	// prepare runs before A acquires, hit while A is held up, restore
	// after the round; each may be nil.
	prepare, hit, restore func(ctx context.Context, s *site, ttl time.Duration) error
}

// links routes A's connections to the cut-off nodes through proxies of its
// own, which the partition cuts: a paused node would not do, since it runs
// A's queued requests when it resumes.
func (nodeFault) links(ctx context.Context, c *cell) error {
	cut := c.topo.cutOff()
	c.aRedis = c.topo.addrs()
	for i, s := range cut {
		px, err := faults.StartProxy(s.addr())
		if err != nil {
			return err
		}
		c.onClose(func() { px.Close() })
		c.cut = append(c.cut, px)
		c.aRedis[len(c.aRedis)-len(cut)+i] = px.Addr()
	}
	return nil
}

func (f nodeFault) before(ctx context.Context, c *cell) error {
	if f.prepare != nil {
		if err := f.prepare(ctx, c.topo.faulted(), c.ttl); err != nil {
			return err
		}
	}
	for _, px := range c.cut {
		px.Cut()
	}
	return nil
}

func (f nodeFault) inject(ctx context.Context, c *cell, _ *holderA) error {
	if f.hit == nil {
		return nil
	}
	return f.hit(ctx, c.topo.faulted(), c.ttl)
}

func (f nodeFault) after(ctx context.Context, c *cell) error {
	if f.restore == nil {
		return nil
	}
	return f.restore(ctx, c.topo.faulted(), c.ttl)
}
