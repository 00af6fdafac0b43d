package testenv

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// GoroutineID is the calling goroutine's id, from its stack's first line
// ("goroutine 18 [running]:").
func GoroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf, _ = bytes.CutPrefix(buf, []byte("goroutine "))
	id, _, _ := bytes.Cut(buf, []byte(" "))
	n, _ := strconv.ParseUint(string(id), 10, 64)
	return n
}

// Goroutines is a go-redis hook (AddHook) that records the goroutine each
// command and pipeline goes out on: a test of "sent from the caller's
// goroutine" reads them with Take.
type Goroutines struct {
	mu  sync.Mutex
	ids []uint64
}

func (g *Goroutines) note() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids = append(g.ids, GoroutineID())
}

// Take returns the goroutines recorded since the last Take.
func (g *Goroutines) Take() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := g.ids
	g.ids = nil
	return ids
}

func (g *Goroutines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *Goroutines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.note()
		return next(ctx, cmd)
	}
}

func (g *Goroutines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.note()
		return next(ctx, cmds)
	}
}
