package lease_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
)

// counting gives lock n a counter at 0 that never expires, so that the
// tokens of a countingClient count 1, 2, 3...: for the tests of the
// counter's arithmetic. (A missing counter starts at the server's clock:
// see the counter rule.) It returns n.
func counting(t testing.TB, rdb redis.Cmdable, n string) string {
	t.Helper()
	require.NoError(t, rdb.Set(t.Context(), protocol.KeysFor("fencelock:", n).Counter, 0, 0).Err())
	return n
}
