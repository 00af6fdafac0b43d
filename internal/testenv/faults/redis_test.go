package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

func TestExpireAllEvictRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := testenv.NewRedis(t)
	c := r.Client()
	defer c.Close()
	if err := c.Set(ctx, "lock", "a", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "counter", 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := faults.ExpireAll(ctx, c); err != nil || n != 1 {
		t.Fatalf("ExpireAll = %d, %v; want 1 key", n, err)
	}
	if keys := c.Keys(ctx, "*").Val(); len(keys) != 1 || keys[0] != "counter" {
		t.Fatalf("after ExpireAll: %q, want only the counter", keys)
	}

	if _, err := faults.Evict(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, "counter").Val(); n != 0 {
		t.Fatal("the counter survived eviction")
	}
	if err := faults.Unevict(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys left after Unevict", n)
	}

	c.Set(ctx, "counter", 7, 0)
	if err := faults.Restart(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys after a restart without persistence", n)
	}
}

func TestFailoverToLaggingReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f, err := faults.StartFailover(ctx, testenv.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := testenv.CtxClient(t, f.Addr(), 3)
	if err := faults.PauseFor(ctx, f.Primary(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := f.LagReplica(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := f.Primary()
	if err := f.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if f.Primary() == old {
		t.Fatal("the primary did not change")
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("the promoted replica has the key the primary wrote after the lag (%d, %v)", n, err)
	}
	if err := f.Rejoin(ctx); err != nil {
		t.Fatal(err)
	}
}
