package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
)

// Info is a lock's state at one instant.
type Info struct {
	Name string
	// Holder is the current holder id, "" when the lock is free.
	Holder string
	// Token is the current holder's token; the zero Token when free.
	Token fence.Token
	// TTL is the lock's remaining time to live in Redis; 0 when free.
	TTL time.Duration
	// LastSeq is the counter: the last Seq issued for the name (0 if none,
	// or if the counter was lost).
	LastSeq uint64
	// Queued is how many fair waiters have a place in the queue (some may
	// have tickets that expired and are dropped at the next handoff).
	Queued int
}

// usable checks what every call of a client needs before any I/O.
func (c *Client) usable(ctx context.Context) error {
	switch {
	case c == nil || c.rdb == nil:
		return invalid("nil client")
	case ctx == nil:
		return invalid("nil context")
	}
	return nil
}

// Inspect reads lock name's holder, remaining ttl and counter in one atomic
// round trip.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if err := c.usable(ctx); err != nil {
		return Info{}, err
	}
	if err := fence.ValidateKey(name); err != nil {
		return Info{}, invalid("%w", err)
	}
	s, err := protocol.Inspect(ctx, c.rdb, protocol.KeysFor(c.cfg.Prefix, name))
	if err != nil {
		return Info{}, fmt.Errorf("lease: inspect %q: %w", name, err)
	}
	info := Info{Name: name, Holder: s.Holder, TTL: s.PTTL, LastSeq: s.LastSeq, Queued: s.Queued}
	if s.Holder != "" {
		info.Token = fence.Token{Key: name, Seq: s.Seq, Holder: s.Holder}
	}
	return info, nil
}

// Advance lifts lock name's counter to at least floor (an atomic max) and
// returns the counter afterwards; the next token is greater than it. A
// missing counter stands at the Redis server's clock (see the counter rule
// in the package doc), so the value returned may be above floor. Use it
// to heal after the counter went backwards: a verifier's stale-token error
// carries the highest Seq the storage has seen.
func (c *Client) Advance(ctx context.Context, name string, floor uint64) (uint64, error) {
	if err := c.usable(ctx); err != nil {
		return 0, err
	}
	if err := fence.ValidateKey(name); err != nil {
		return 0, invalid("%w", err)
	}
	if floor >= fence.MaxSeq {
		return 0, invalid("floor %d leaves no room below 2^53-1", floor)
	}
	n, err := protocol.Advance(ctx, c.rdb, protocol.KeysFor(c.cfg.Prefix, name), floor, c.counter())
	if err != nil {
		return 0, fmt.Errorf("lease: advance %q: %w", name, err)
	}
	return n, nil
}
