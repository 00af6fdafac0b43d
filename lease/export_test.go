package lease

import "github.com/fencelock/fencelock/internal/family"

// Unbatched makes c send each try and cleanup directly, one round trip
// each, for the benchmarks that measure what batching gains.
func Unbatched(c *Client) *Client {
	if s, ok := c.s.(*single); ok {
		s.tr = family.NewTransport(s.rdb, false)
	}
	return c
}

// Senders returns the goroutines of c's transport: its senders, busy or
// idle, and its direct calls in flight.
func Senders(c *Client) int { return c.s.(*single).tr.Senders() }
