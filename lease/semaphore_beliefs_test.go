package lease_test

// What TestSemaphoreProcessNeverMoreThanN's children believed, read from
// their files, and the checks on it: how many beliefs overlapped at once,
// and whether two overlapped on one slot.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// semBelief is one holding of a permit by a semloop child, as it believed.
type semBelief struct {
	child    int
	slot     int
	seq      uint64
	from     int64 // Acquire returned (unix ns)
	released int64 // it stopped using it to release it; 0 if it was killed holding
	deadline int64 // its lease's Deadline()
}

// to is when the belief ended: its release, or its lease's deadline if
// that came first (or the child was killed holding).
func (b semBelief) to() int64 {
	if b.released == 0 {
		return b.deadline
	}
	return min(b.released, b.deadline)
}

// naiveTo is the wrong bound, for the figure: the release alone, as a
// holder that never looks at its lease's validity believes.
func (b semBelief) naiveTo() int64 {
	if b.released == 0 {
		return b.deadline
	}
	return b.released
}

func (b semBelief) String() string {
	return fmt.Sprintf("child %d slot %d seq %d [%s, %s] (deadline %s, released %s)", b.child, b.slot, b.seq,
		unixTime(b.from).Format("15:04:05.000000"), unixTime(b.to()).Format("15:04:05.000000"),
		unixTime(b.deadline).Format("15:04:05.000000"), unixTime(b.released).Format("15:04:05.000000"))
}

// readBeliefs reads a semloop child's file: each start line followed by
// its end line, but for a last start with no end (killed while holding).
func readBeliefs(t *testing.T, child int, file string) []semBelief {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil // killed before it first held
	}
	require.NoError(t, err)
	var bs []semBelief
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	open := false
	for i, line := range lines {
		if line == "" {
			continue
		}
		var r semRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), "%s line %d: %q", file, i+1, line)
		if r.End == 0 {
			require.False(t, open, "%s line %d: a start after a start", file, i+1)
			bs = append(bs, semBelief{child: child, slot: r.Slot, seq: r.Seq, from: r.From, deadline: r.Deadline})
			open = true
			continue
		}
		require.True(t, open, "%s line %d: an end with no start", file, i+1)
		last := &bs[len(bs)-1]
		require.True(t, last.slot == r.Slot && last.seq == r.Seq, "%s line %d: the end of another permit than %d/%d", file, i+1, last.slot, last.seq)
		last.released, last.deadline, open = r.End, max(last.deadline, r.Deadline), false
	}
	return bs
}

// semMostAtOnce returns the most beliefs that overlapped at one instant
// (an interval [from, to), empty when to <= from) and those beliefs.
func semMostAtOnce(bs []semBelief, to func(semBelief) int64) (int, []semBelief) {
	type event struct {
		at int64
		up bool
		i  int
	}
	var evs []event
	for i, b := range bs {
		if to(b) > b.from {
			evs = append(evs, event{b.from, true, i}, event{to(b), false, i})
		}
	}
	slices.SortFunc(evs, func(a, b event) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		switch { // an end at the instant another begins: no overlap
		case a.up == b.up:
			return 0
		case a.up:
			return 1
		default:
			return -1
		}
	})
	alive := map[int]bool{}
	most, at := 0, []semBelief(nil)
	for _, e := range evs {
		if !e.up {
			delete(alive, e.i)
			continue
		}
		alive[e.i] = true
		if len(alive) > most {
			most, at = len(alive), nil
			for i := range alive {
				at = append(at, bs[i])
			}
		}
	}
	return most, at
}

// semSlotOverlaps returns, for each slot, the beliefs that began before
// the slot's previous belief ended, or with a token not above its.
func semSlotOverlaps(bs []semBelief, to func(semBelief) int64) []string {
	bySlot := map[int][]semBelief{}
	for _, b := range bs {
		if to(b) > b.from {
			bySlot[b.slot] = append(bySlot[b.slot], b)
		}
	}
	var bad []string
	for _, s := range bySlot {
		slices.SortFunc(s, func(a, b semBelief) int { return cmp.Compare(a.from, b.from) })
		for i := 1; i < len(s); i++ {
			if s[i].from < to(s[i-1]) || s[i].seq <= s[i-1].seq {
				bad = append(bad, fmt.Sprintf("%v then %v", s[i-1], s[i]))
			}
		}
	}
	return bad
}
