package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
)

// TestSemaphoreKeysBounded: what a semaphore leaves in Redis after its
// permits were released expires, as a lock's keys do (DESIGN.md, "Keys
// are bounded"; docs/design.md: after a release only the counter is left,
// and it expires with the counter ttl): a try, a waiter queued, a
// handoff, the releases, and every key under the semaphore's name has a
// ttl.
//
// It fails while sem_acquire.lua writes the permits key without one
// (SET KEYS[7] ARGV[7]): every semaphore name then leaves its #permits
// key forever.
func TestSemaphoreKeysBounded(t *testing.T) {
	s := semFor(t, 2)
	a := permitTry(t, s, "a", protocol.NewAttempt())
	b := permitTry(t, s, "b", protocol.NewAttempt())
	require.True(t, a.Got() && b.Got())
	require.Equal(t, protocol.Held, permitTry(t, s, "c", protocol.NewAttempt()).Outcome)
	require.True(t, release(t, s, a.Slot, "a")) // handed to c
	require.True(t, release(t, s, a.Slot, "c"))
	require.True(t, release(t, s, b.Slot, "b"))

	base := s.Permits[:len(s.Permits)-len("permits")] // PREFIX{NAME}#
	keys, err := rdb.Keys(t.Context(), base+"*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys, "the slots' counters live on for their ttl")
	for _, k := range keys {
		assert.Positive(t, pttl(t, k), "%s is left without a ttl", k)
	}
}
