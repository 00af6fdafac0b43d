package lease

// Unbatched makes c send its script calls one per round trip, as before
// batching, for the benchmarks that measure what batching gains.
func Unbatched(c *Client) *Client {
	c.rdb = c.raw
	return c
}
