package script

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed reissue.lua
	reissueSrc string
	reissue    = redis.NewScript(reissueSrc)
)

// Reissue gives holder, if it still has the lock, a new Seq above both the
// counter and floor, keeping the lock and its ttl. It returns 0 when the
// holder no longer has the lock.
func Reissue(ctx context.Context, c redis.Scripter, k Keys, holder string, floor uint64) (uint64, error) {
	n, err := reissue.Run(ctx, c, []string{k.Lock, k.Counter}, holder, floor).Int64()
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// Pipeliner is a client that can send commands down one connection: a
// *redis.Client, or one node of a cluster.
type Pipeliner interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// AcquireAcked runs the acquire script and WAIT replicas timeout in one
// pipeline, so that both use the same connection and WAIT covers the
// script's writes. It returns how many replicas acknowledged.
func AcquireAcked(ctx context.Context, c Pipeliner, k Keys, a AcquireArgs, replicas int, timeout time.Duration) (AcquireResult, int64, error) {
	res, acked, err := acquireAcked(ctx, c, k, a, replicas, timeout)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := acquire.Load(ctx, c).Err(); err != nil {
			return AcquireResult{}, 0, err
		}
		res, acked, err = acquireAcked(ctx, c, k, a, replicas, timeout)
	}
	return res, acked, err
}

func acquireAcked(ctx context.Context, c Pipeliner, k Keys, a AcquireArgs, replicas int, timeout time.Duration) (AcquireResult, int64, error) {
	p := c.Pipeline()
	run := acquire.EvalSha(ctx, p, k.all(), acquireArgs(a)...)
	wait := p.Do(ctx, "WAIT", replicas, timeout.Milliseconds())
	_, _ = p.Exec(ctx)
	if err := run.Err(); err != nil {
		return AcquireResult{}, 0, err
	}
	res, err := parseAcquire(run.Val())
	if err != nil {
		return AcquireResult{}, 0, err
	}
	acked, err := wait.Int64()
	if err != nil {
		return res, 0, fmt.Errorf("WAIT: %w", err)
	}
	return res, acked, nil
}

var (
	//go:embed adopt.lua
	adoptSrc string
	adopt    = redis.NewScript(adoptSrc)
)

// Adopt lifts the counter to at least seq and, if holder has the lock,
// makes seq its token's Seq; it returns the counter afterwards.
func Adopt(ctx context.Context, c redis.Scripter, k Keys, holder string, seq uint64) (uint64, error) {
	n, err := adopt.Run(ctx, c, []string{k.Lock, k.Counter}, holder, seq).Int64()
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}
