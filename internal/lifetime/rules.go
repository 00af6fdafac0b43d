package lifetime

import (
	"context"
	"fmt"
	"time"
)

// DriftFloor is added to every drift allowance, as in the Redlock
// description: it covers the millisecond resolution of Redis expiries.
const DriftFloor = 2 * time.Millisecond

// MinKeepAlive is the shortest keep-alive period accepted: below it the
// refreshes would load Redis for no gain (a 1ns period made 17k refresh
// scripts a second).
const MinKeepAlive = 10 * time.Millisecond

// Drift is the clock-drift allowance for ttl: ttl×factor + DriftFloor.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + DriftFloor
}

// Validity is what a ttl leaves after the drift allowance.
func Validity(ttl time.Duration, factor float64) time.Duration {
	return ttl - Drift(ttl, factor)
}

// CheckTTL is the one ttl rule: a ttl must be at least a millisecond (the
// resolution of Redis expiries) and leave positive validity after the drift
// allowance, or the lease would be dead on arrival.
func CheckTTL(ttl time.Duration, factor float64) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("ttl %v is below 1ms", ttl)
	}
	if v := Validity(ttl, factor); v <= 0 {
		return fmt.Errorf("ttl %v leaves no validity after the drift allowance %v", ttl, Drift(ttl, factor))
	}
	return nil
}

// CheckDriftFactor is the one drift-factor rule: f in [0, 0.5).
func CheckDriftFactor(f float64) error {
	if !(f >= 0 && f < 0.5) {
		return fmt.Errorf("drift factor %v is outside [0, 0.5)", f)
	}
	return nil
}

// KeepAliveEvery returns the keep-alive period for ttl: every, or when every
// is 0 the default ttl/3 (at least MinKeepAlive). The period must be at
// least MinKeepAlive and shorter than the validity of the ttl, or the lease
// would expire between two refreshes.
func KeepAliveEvery(ttl, every time.Duration, factor float64) (time.Duration, error) {
	if every == 0 {
		every = max(ttl/3, MinKeepAlive)
	}
	if every < MinKeepAlive {
		return 0, fmt.Errorf("keep-alive interval %v is below the floor %v", every, MinKeepAlive)
	}
	if v := Validity(ttl, factor); every >= v {
		return 0, fmt.Errorf("keep-alive interval %v must be shorter than the validity %v of the ttl %v", every, v, ttl)
	}
	return every, nil
}

// Detach runs cleanup, a best-effort call after a failed or abandoned
// request, under a context of its own bounded by bound, and waits for it
// only while ctx lives: when ctx ends first, Detach returns nil at once and
// cleanup goes on in the background until it ends or bound passes.
// So a cleanup never makes a call outlive its context, and it is not
// dropped either.
func Detach(ctx context.Context, bound time.Duration, cleanup func(context.Context) error) error {
	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		defer cancel()
		done <- cleanup(cctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}
