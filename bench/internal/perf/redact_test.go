package perf

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedisURLNoPassword: a -redis-url that does not parse, or whose server
// does not answer, is named in the error without its password.
func TestRedisURLNoPassword(t *testing.T) {
	for _, u := range []string{
		"redis://u:S3cret@127.0.0.1:1/0",              // nothing listens on port 1
		"redis://u:S3cret@127.0.0.1:notaport/0",       // does not parse
		"redis://127.0.0.1:1/0?password=S3cret",       // a password parameter
		"redis://u:S3cret@127.0.0.1:1/0?bogus=1",      // an option go-redis refuses
		"redis://127.0.0.1:1/0?password=S3cret&x=%zz", // a bad escape
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e := &env{}
		err := e.setupRedis(ctx, "", u, false)
		cancel()
		for _, c := range e.closers {
			c()
		}
		require.Error(t, err, u)
		assert.NotContains(t, err.Error(), "S3cret", u)
	}
}
