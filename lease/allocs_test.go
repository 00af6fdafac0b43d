package lease_test

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/fencelock/fencelock/lease"
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

// maxPermitAllocs bounds the allocations of one uncontended TryAcquire+
// Release of a semaphore's permit, whatever N: the semaphore's keys are
// built once, and its scripts make the slots' key names (a call names 7
// keys, not 3 per slot). It measured 42 (170 for N = 10 before both).
const maxPermitAllocs = 45

// TestUncontendedPermitAllocs: a permit costs as few allocations with 64
// permits as with one.
func TestUncontendedPermitAllocs(t *testing.T) {
	if raceBuild() {
		t.Skip("the race detector allocates on its own")
	}
	c := newClient(t)
	ctx := context.Background()
	for _, permits := range []int{1, lease.MaxPermits} {
		s, err := c.Semaphore(fmt.Sprintf("%s/%d", name(t), permits), permits)
		if err != nil {
			t.Fatal(err)
		}
		n := testing.AllocsPerRun(200, func() {
			l, err := s.TryAcquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%d permits: %.0f allocations per acquire+release", permits, n)
		if n > maxPermitAllocs {
			t.Errorf("%d permits: %.0f allocations per acquire+release, want at most %d", permits, n, maxPermitAllocs)
		}
	}
}
