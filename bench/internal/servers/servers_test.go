package servers_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/bench/internal/servers"
	"github.com/fencelock/fencelock/internal/testenv"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ info, want string }{
		{"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n", "redis 7.0.15"},
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n", "valkey 8.0.1"},
		{"redis_version:7.2.4\r\nserver_name:valkey\r\n", "redis 7.2.4"}, // no valkey_version: what it does say
		{"", "unknown"},
	} {
		assert.Equal(t, c.want, servers.Parse(c.info).String(), "%q", c.info)
	}
}

// TestIdentify asks real servers of every installed kind.
func TestIdentify(t *testing.T) {
	for _, kind := range servers.Kinds {
		t.Run(kind, func(t *testing.T) {
			if !servers.Installed(kind) {
				t.Skipf("%s is not installed", servers.Binary(kind))
			}
			r, err := testenv.StartRedis(t.Context(), testenv.RedisOptions{Server: servers.Binary(kind)})
			require.NoError(t, err)
			t.Cleanup(func() { r.Close() })
			c := redis.NewClient(r.Options())
			t.Cleanup(func() { c.Close() })
			s, err := servers.Identify(t.Context(), c)
			require.NoError(t, err)
			assert.Equal(t, kind, s.Name)
			assert.Regexp(t, `^\d+\.\d+\.\d+$`, s.Version)
		})
	}
}
