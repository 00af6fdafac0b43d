package family

import (
	"math/rand/v2"
	"time"
)

// Backoff is the wait of both kinds between the tries of a waiting acquire
// when nothing woke it: the n-th wait is drawn at random from [d/2, d], with
// d = Min×2ⁿ capped at Max. The randomness keeps competing waiters apart.
type Backoff struct{ Min, Max time.Duration }

// Backoff returns the client's backoff.
func (c *Config) Backoff() Backoff { return Backoff{Min: c.MinBackoff, Max: c.MaxBackoff} }

// Wait returns the wait after n waits that nothing cut short.
func (b Backoff) Wait(n int) time.Duration {
	d := b.Min
	for ; n > 0 && d < b.Max; n-- {
		if d > b.Max/2 {
			d = b.Max
		} else {
			d *= 2
		}
	}
	return Jitter(min(d, b.Max))
}

// Jitter returns a random duration in [d/2, d].
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}
