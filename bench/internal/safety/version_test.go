package safety

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/testenv"
)

// TestRedisVersionNamesValkey: the report's header names the server the
// scenarios start by its own name and version, not by the redis_version
// 7.2.4 that Valkey reports for compatibility.
func TestRedisVersionNamesValkey(t *testing.T) {
	if _, err := exec.LookPath("valkey-server"); err != nil {
		t.Skip("valkey-server is not installed (scripts/deps.sh --valkey)")
	}
	t.Setenv(testenv.ServerEnv, "valkey-server")
	if v := redisVersion(t.Context()); !strings.HasPrefix(v, "valkey 8") {
		t.Errorf("on valkey-server: %q, want valkey 8…", v)
	}
	t.Setenv(testenv.ServerEnv, "redis-server")
	if v := redisVersion(t.Context()); !strings.HasPrefix(v, "redis ") {
		t.Errorf("on redis-server: %q, want redis …", v)
	}
}
