package lease

import (
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/internal/transport"
)

// Unbatched makes c send each try and cleanup directly, one round trip
// each, for the benchmarks that measure what batching gains.
func Unbatched(c *Client) *Client {
	n := c.s.(*quorum.Strategy).Nodes()[0]
	n.Tr = transport.NewTransport(n.RDB, false)
	return c
}

// Senders returns the goroutines of c's transport: its senders, busy or
// idle, and its direct calls in flight.
func Senders(c *Client) int { return c.s.(*quorum.Strategy).Nodes()[0].Tr.Senders() }
