package main

import (
	"testing"

	"github.com/fencelock/fencelock/bench/internal/report"
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
