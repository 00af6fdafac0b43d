package lease_test

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"
	"time"
)

// maxAllocs bounds the allocations of one uncontended TryAcquire+Release
// with the defaults (fair, fenced), go-redis's own included (about 29 of
// them for its two script calls of 6 keys each). It was 73, then 50 with
// the scripts' new keys; internal/protocol boxes what a lock's calls
// repeat once per lock, and lends each call an argument list; the one-Redis
// attempt carries its first grant's backend, and its release makes no slice.
const maxAllocs = 38

// TestUncontendedAllocs: one uncontended acquire+release stays within
// maxAllocs allocations. Not parallel, so no other test's allocations
// count.
func TestUncontendedAllocs(t *testing.T) {
	if raceBuild() {
		t.Skip("the race detector allocates on its own")
	}
	c := newClient(t)
	ctx := context.Background()
	const runs = 200
	names := make([]string, runs+1) // AllocsPerRun runs it once more to warm up
	for i := range names {
		names[i] = fmt.Sprintf("%s/%d", name(t), i)
	}
	i := 0
	n := testing.AllocsPerRun(runs, func() {
		l, err := c.TryAcquire(ctx, names[i], time.Minute)
		i++
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocations per acquire+release", n)
	if n > maxAllocs {
		t.Errorf("%.0f allocations per acquire+release, want at most %d", n, maxAllocs)
	}
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
