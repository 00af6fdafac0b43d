// Package counterbound holds how far above a server's clock a lock's
// counter may be lifted: the one value that doctor, inspect, repair-counter
// and the verifiers' clock bound read.
//
// TODO(issue 31): internal/protocol will export the bound its scripts
// enforce (Advance, Reissue, heal, the Redlock write-back); use that one
// and remove this package.
package counterbound

import "time"

// Ahead is the most a counter may stand above its server's TIME, in the
// clock floor's unit (1 Seq = 1µs): 24 hours. A counter higher than the
// server's clock plus Ahead was lifted by a forged or mistyped number
// (a counter that follows the clock cannot get there) and is poisoned.
const Ahead = 24 * time.Hour

// Micros returns t in microseconds since the Unix epoch: the Seq that a
// clock floor gives at t.
func Micros(t time.Time) uint64 { return uint64(t.UnixMicro()) }

// Limit returns the highest counter that is not poisoned on a server whose
// clock reads now.
func Limit(now time.Time) uint64 { return Micros(now) + uint64(Ahead/time.Microsecond) }
