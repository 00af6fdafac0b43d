//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// frozen starts a Redis and freezes it (SIGSTOP) until the test ends: it
// accepts connections but never answers.
func frozen(t *testing.T) *testenv.Redis {
	t.Helper()
	r := testenv.NewRedis(t)
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Resume() })
	return r
}

// slack is what a test allows past a command's own bound (the bound itself
// allows finishSlack): generous, for a noisy shared machine.
const slack = 1500 * time.Millisecond

// TestDeadlinesFrozenRedis: against a Redis that never answers, run --wait
// D returns within D (plus the slack), and run without --wait, inspect,
// advance, reset-highwater and repair-counter within --timeout (5s by
// default), each with status 1. Before,
// the probe after a failed acquire (5s), go-redis's read timeouts and
// retries and the 2s wait for cleanups at exit added up to 9s for
// run --wait 2s.
func TestDeadlinesFrozenRedis(t *testing.T) {
	t.Parallel()
	single := []string{"--redis", frozen(t).URL()}
	var urls []string
	for range 3 {
		urls = append(urls, frozen(t).URL())
	}
	redlock := []string{"--redis", strings.Join(urls, ",")}
	for _, tc := range []struct {
		what  string
		args  []string
		bound time.Duration
	}{
		{"run --wait 2s", append(single, "run", "--wait", "2s", "x", "--", "true"), 2 * time.Second},
		{"run", append(single, "run", "x", "--", "true"), defaultTimeout},
		{"inspect --timeout 2s", append(single, "inspect", "--timeout", "2s", "x"), 2 * time.Second},
		{"advance --timeout 2s", append(single, "--timeout", "2s", "advance", "x", "5"), 2 * time.Second},
		{"reset-highwater --timeout 2s", append(single, "--timeout", "2s", "reset-highwater", "--verifier", single[1], "x", "res"), 2 * time.Second},
		{"repair-counter --timeout 2s", append(single, "--timeout", "2s", "repair-counter", "--yes", "x"), 2 * time.Second},
		{"redlock repair-counter --timeout 2s", append(redlock, "--timeout", "2s", "repair-counter", "--yes", "x"), 2 * time.Second},
		{"redlock run --wait 2s", append(redlock, "run", "--wait", "2s", "x", "--", "true"), 2 * time.Second},
		{"redlock run --timeout 1s", append(redlock, "run", "--timeout", "1s", "x", "--", "true"), time.Second},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			r := fl(t, "", tc.args...)
			took := time.Since(begin)
			t.Logf("took %v", took.Round(time.Millisecond))
			if r.code != exitFailure {
				t.Errorf("exit %d, want %d (Redis does not answer)", r.code, exitFailure)
			}
			if took > tc.bound+slack {
				t.Errorf("took %v, want at most %v + %v", took.Round(time.Millisecond), tc.bound, slack)
			}
		})
	}
}
