package lease

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/internal/emit"
)

// named wraps an acquire so that, when its context ends it with no reply
// from Redis (go-redis retrying a refused dial, say), its error names the
// client's last failed dial since the acquire began:
//
//	lease: not acquired: "job": context deadline exceeded (last dial to 127.0.0.1:6379: connect: connection refused)
//
// The error still wraps ErrNotAcquired and ctx.Err().
func (c *Client) named(run func(context.Context, *emit.Progress) (*Lease, error)) func(context.Context, *emit.Progress) (*Lease, error) {
	return func(ctx context.Context, p *emit.Progress) (*Lease, error) {
		start := time.Now()
		l, err := run(ctx, p)
		if err != nil && c != nil {
			err = c.dials.Explain(err, start)
		}
		return l, err
	}
}
