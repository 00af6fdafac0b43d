package redlock

import "os"

// FENCELOCK_UNBATCHED=1 makes the nodes send each call directly, one round
// trip each, to measure what batching gains (TestWaitersBurstDefaultNodeTimeout).
func init() {
	if os.Getenv("FENCELOCK_UNBATCHED") != "" {
		batching = false
	}
}
