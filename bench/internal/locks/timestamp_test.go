package locks

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
)

// TestTimestampLock walks the recipe: a held lock refuses, an expired one
// is taken over with GETSET, and a holder whose timestamp passed neither
// thinks it holds the lock nor deletes its successor's.
func TestTimestampLock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(r.Options())
	t.Cleanup(func() { rdb.Close() })
	const ttl = 200 * time.Millisecond
	l, err := New("setnx-getset", Clients{Single: rdb}, Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	a, err := l.Try(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Try(ctx, "k"); !errors.Is(err, ErrHeld) {
		t.Fatalf("second Try = %v, want ErrHeld", err)
	}
	if pttl := rdb.PTTL(ctx, "k").Val(); pttl != -1 {
		t.Fatalf("key has a TTL (%v); the recipe sets none", pttl)
	}
	time.Sleep(ttl + 20*time.Millisecond)
	if a.Held() {
		t.Fatal("A's timestamp passed, yet Held")
	}
	b, err := l.Try(ctx, "k")
	if err != nil {
		t.Fatalf("Try on an expired timestamp: %v", err)
	}
	if err := a.Release(ctx); err == nil {
		t.Fatal("A released after its timestamp passed")
	}
	if n := rdb.Exists(ctx, "k").Val(); n != 1 {
		t.Fatal("A's late release deleted B's lock")
	}
	if !b.Held() {
		t.Fatal("B does not hold the lock")
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Try(ctx, "k"); err != nil {
		t.Fatalf("Try after release: %v", err)
	}
}
