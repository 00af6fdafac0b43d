//go:build unix

package main

import (
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/lifetime"
)

// When run stops its command: the shortest ttl it accepts, and the end
// game of a lease that is being lost or was lost.

// minTTL is run's shortest --ttl. The keep-alive refreshes every ttl/3,
// but no more often than every lifetime.MinKeepAlive, and endGame stops the
// command once half the ttl is left without a refresh: below 3×MinKeepAlive
// that comes between two healthy refreshes, and the lease refuses a ttl
// whose validity is shorter than the period, blaming an interval the user
// never set.
const minTTL = 3 * lifetime.MinKeepAlive

// ttlTooShort says what is wrong with a --ttl below minTTL.
func ttlTooShort(ttl time.Duration) error {
	return fmt.Errorf("--ttl %v is too short, the shortest is %v: run refreshes the lease every ttl/3 but no more often than every %v, and stops the command when half the ttl is left without a refresh, which a shorter ttl reaches between two refreshes",
		ttl, minTTL, lifetime.MinKeepAlive)
}

// killMargin is how long before the lease's local deadline SIGKILL is sent
// to the command when the lease is being lost or was lost (at most a tenth
// of the ttl): time for the kernel to end the process group.
const killMargin = 100 * time.Millisecond

// endGame is when run stops the command of a lease whose refreshes fail:
// SIGTERM when no more than term is left before the lease's local
// deadline, and SIGKILL grace later, margin before the deadline. grace is
// --grace, shortened to ttl/2 − margin: a healthy keep-alive (every ttl/3)
// keeps more than half the ttl ahead, so only a lease whose refresh failed
// (or took more than a sixth of the ttl) gets that close to its deadline.
func endGame(ttl, grace time.Duration) (term, g, margin time.Duration) {
	margin = min(killMargin, ttl/10)
	g = max(min(grace, ttl/2-margin), 0)
	return g + margin, g, margin
}

// lostGrace is the grace of a command whose lease was lost at once (a
// refresh found the lock gone or held by another, or the deadline passed
// while fencelock was paused): the lock may already have another holder,
// so the command gets min(grace, margin), endGame's margin: time to act on
// SIGTERM but not to run on beside the next holder.
func lostGrace(ttl, grace time.Duration) time.Duration {
	_, _, margin := endGame(ttl, grace)
	return min(grace, margin)
}
