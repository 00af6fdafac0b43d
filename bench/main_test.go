package main

import (
	"context"
	"io"
	"testing"

	"github.com/fencelock/fencelock/bench/internal/checkrun"
	"github.com/fencelock/fencelock/bench/internal/perf"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/safety"
)

// TestVersions: the report names the peers' versions, from the build info
// (which only a main package's binary carries).
func TestVersions(t *testing.T) {
	v := report.Versions()
	for _, mod := range []string{"github.com/go-redsync/redsync/v4", "github.com/redis/rueidis", "github.com/bsm/redislock"} {
		if v[mod] == "" {
			t.Errorf("versions lack %s: %v", mod, v)
		}
	}
}

// TestExitStatus: -h exits 0, a bad flag or argument of any command 2 (as
// the fencelock command does), before any server is started.
func TestExitStatus(t *testing.T) {
	ctx := context.Background()
	runs := map[string]func([]string) error{
		"perf":   func(a []string) error { return perf.Run(ctx, a, io.Discard, io.Discard) },
		"safety": func(a []string) error { _, err := safety.Run(ctx, a, io.Discard, io.Discard); return err },
		"check":  func(a []string) error { _, err := checkrun.Run(ctx, a, io.Discard, io.Discard); return err },
	}
	for name, run := range runs {
		if got := exitStatus(run([]string{"-h"})); got != 0 {
			t.Errorf("%s -h: exit %d, want 0", name, got)
		}
		for _, args := range [][]string{{"-nosuchflag"}, {"extra"}, {"-locks", "nosuchlock"}} {
			if got := exitStatus(run(args)); got != 2 {
				t.Errorf("%s %q: exit %d, want 2", name, args, got)
			}
		}
	}
}
