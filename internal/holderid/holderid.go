// Package holderid makes the holder ids of leases: random UUIDs (version 4)
// in their text form, from crypto/rand.
package holderid

import (
	"crypto/rand"

	"github.com/google/uuid"
)

// New returns a fresh holder id, such as
// "9b2c4f0e-3d1a-4c6b-8e2f-5a7d9c1b3e4f", with one allocation: its text
// (uuid.NewString makes two).
func New() string {
	var u uuid.UUID
	_, _ = rand.Read(u[:])  // never fails; the buffer stays on the stack
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 4122
	return u.String()
}
