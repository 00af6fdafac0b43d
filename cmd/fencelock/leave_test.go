//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestLeaveQueueOnSignal: a `run --wait` that waits in a fair lock's queue
// and gets SIGTERM or SIGINT exits with 128+N and takes its ticket with it
// (see DESIGN.md, "Liveness": a waiter that leaves, by cancel, timeout,
// signal or exit, takes its ticket with it). So when the holder then
// releases, the lock is free, not handed to the waiter that left for the
// 20s ttl it asked for, and the next `run` gets it at once.
func TestLeaveQueueOnSignal(t *testing.T) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGINT", syscall.SIGINT}} {
		sig := tc.sig
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			name := lockName(t)
			queue := "fencelock:{" + name + "}:queue"
			dir := t.TempDir()
			h, _ := holder(t, dir, on("run", name)...)

			w := start(t, t.TempDir(), on("run", "--ttl", "20s", "--wait", "30s", name, "--", "true")...)
			var id string
			deadline := time.Now().Add(15 * time.Second)
			for id == "" {
				m, err := rdb.ZRange(ctx, queue, 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				if len(m) == 1 {
					id = m[0]
				} else if time.Now().After(deadline) {
					t.Fatalf("the waiting run did not queue: queue %q", m)
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
			if err := w.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if r := w.wait(t); r.code != 128+int(sig) {
				t.Errorf("%s while waiting: exit %d, want %d", tc.name, r.code, 128+int(sig))
			}
			if score, err := rdb.ZScore(ctx, queue, id).Result(); !errors.Is(err, redis.Nil) {
				t.Errorf("after the waiting run exited on %s, the queue still holds its ticket %s (ZSCORE %v, %v)", tc.name, id, score, err)
			}

			if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if r := h.wait(t); r.code != 0 {
				t.Fatalf("holder: exit %d", r.code)
			}
			if r := fl(t, "", on("run", name, "--", "true")...); r.code != exitOK {
				v, _ := rdb.Get(context.Background(), "fencelock:{"+name+"}").Result()
				t.Errorf("run after the holder released: exit %d, want %d (the lock is free): %s; lock key holds %q (the waiter that left was %s)",
					r.code, exitOK, r.stderr, v, id)
			}
		})
	}
}
