package testenv

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTLSRedis starts a TLS-only and a mutual-TLS server: a plaintext
// client is refused by both, a client that trusts the CA reaches the
// TLS-only one, and the mutual-TLS one only with the client certificate.
func TestTLSRedis(t *testing.T) {
	ctx := t.Context()
	for _, mode := range []TLSMode{TLSOnly, MutualTLS} {
		r := NewRedis(t, RedisOptions{TLS: mode})
		require.NotNil(t, r.TLS())
		assert.Equal(t, "rediss://"+r.Addr()+"/0", r.URL())

		plain := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
		assert.Error(t, plain.Ping(ctx).Err(), "plaintext on a TLS-only port")
		plain.Close()

		c := r.Client() // trusts the CA, presents the client certificate
		require.NoError(t, c.Ping(ctx).Err())
		c.Close()

		noCert, err := r.TLS().ClientConfig(false)
		require.NoError(t, err)
		o := r.Options()
		o.TLSConfig, o.MaxRetries = noCert, -1
		c = redis.NewClient(o)
		err = c.Ping(ctx).Err()
		c.Close()
		if mode == MutualTLS {
			assert.Error(t, err, "mutual TLS without a client certificate")
		} else {
			assert.NoError(t, err)
		}
	}
}
