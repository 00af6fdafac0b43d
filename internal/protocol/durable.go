package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reissue gives holder, if it still has the lock, a new Seq above both the
// counter and floor, keeping the lock and its ttl. It returns 0 when the
// holder no longer has the lock (the counter is lifted to floor anyway).
// A floor more than [MaxAhead] above the server's clock is refused with
// [ErrPoisoned].
func Reissue(ctx context.Context, c redis.Scripter, k Keys, holder string, floor uint64, counter Counter) (uint64, error) {
	l := k.args()
	n, err := reissue.Run(ctx, c, l.lockCounter(), l.holder.of(holder), floor, l.counterTTL.of(ms(counter.TTL))).Int64()
	if err != nil {
		return 0, counterErr(err)
	}
	return uint64(n), nil
}

// Adopt lifts the counter to at least seq and, if holder has the lock,
// makes seq its token's Seq; it returns the counter afterwards. A seq more
// than [MaxAhead] above the server's clock, and above the counter, is
// refused with [ErrPoisoned].
func Adopt(ctx context.Context, c redis.Scripter, k Keys, holder string, seq uint64, counter Counter) (uint64, error) {
	l := k.args()
	n, err := adopt.Run(ctx, c, l.lockCounter(), l.holder.of(holder), seq, l.counterTTL.of(ms(counter.TTL))).Int64()
	if err != nil {
		return 0, counterErr(err)
	}
	return uint64(n), nil
}

// Pipeliner is a client that can send commands down one connection: a
// *redis.Client, or one node of a cluster.
type Pipeliner interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// AcquireAcked runs a try and WAIT replicas timeout in one pipeline, so
// that both use the same connection and WAIT covers the try's writes. It
// returns how many replicas acknowledged.
func AcquireAcked(ctx context.Context, c Pipeliner, k Keys, t Try, replicas int, timeout time.Duration) (TryResult, int64, error) {
	cl := t.call(k)
	defer cl.l.free(cl.args)
	res, acked, err := acquireAcked(ctx, c, k, t, cl, replicas, timeout)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := cl.s.Load(ctx, c); err != nil {
			return TryResult{}, 0, err
		}
		res, acked, err = acquireAcked(ctx, c, k, t, cl, replicas, timeout)
	}
	return res, acked, err
}

func acquireAcked(ctx context.Context, c Pipeliner, k Keys, t Try, cl call, replicas int, timeout time.Duration) (TryResult, int64, error) {
	p := c.Pipeline()
	run := cl.s.EvalSha(ctx, p, cl.keys, cl.args...)
	wait := p.Do(ctx, "WAIT", replicas, timeout.Milliseconds())
	_, _ = p.Exec(ctx)
	if err := run.Err(); err != nil {
		return TryResult{}, 0, err
	}
	res, err := t.parse(k, run.Val())
	if err != nil {
		return TryResult{}, 0, err
	}
	acked, err := wait.Int64()
	if err != nil {
		return res, 0, fmt.Errorf("WAIT: %w", err)
	}
	return res, acked, nil
}
