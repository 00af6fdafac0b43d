package holderid

import (
	"testing"

	"github.com/google/uuid"
)

// TestNewIsARandomUUID: ids parse as version 4 UUIDs of the RFC 4122
// variant, differ, and cost one allocation each.
func TestNewIsARandomUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("%q: %v, version %d, variant %v", id, err, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("%q twice", id)
		}
		seen[id] = true
	}
	if n := testing.AllocsPerRun(100, func() { _ = New() }); n != 1 {
		t.Errorf("%v allocations per id, want 1", n)
	}
}
