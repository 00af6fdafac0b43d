package check

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScheduleDeterministic(t *testing.T) {
	p := Plan{Seed: 42, Duration: time.Minute, Faults: AllFaults}
	a, err := Schedule(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Schedule(p)
	if len(a) < len(AllFaults) || !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different or short schedules:\n%v\n%v", a, b)
	}
	p.Seed = 43
	c, _ := Schedule(p)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 drew the same schedule")
	}
}

// The generator is splitmix64, fixed forever, so a seed printed in a report
// replays the same faults with any Go version. A change here breaks replays.
func TestScheduleGolden(t *testing.T) {
	got, err := Schedule(Plan{Seed: 1, Duration: 10 * time.Second, Faults: []Fault{FaultPauseHolder, FaultEvict}})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, w := range got {
		s = append(s, w.Fault.short()+"@"+w.Start.Round(time.Millisecond).String()+"+"+w.Duration.Round(time.Millisecond).String())
	}
	want := goldenSchedule
	if strings.Join(s, " ") != want {
		t.Fatalf("schedule for seed 1 changed:\n got %s\nwant %s", strings.Join(s, " "), want)
	}
}

func (f Fault) short() string { return strings.SplitN(string(f), "-", 2)[0] }

const goldenSchedule = "pause@1s+311ms evict@1.741s+404ms pause@2.592s+429ms evict@3.337s+648ms evict@4.256s+482ms pause@5.113s+417ms evict@5.982s+348ms pause@6.621s+299ms pause@7.306s+482ms"

func TestScheduleNonOverlappingWithinBounds(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		d := time.Duration(5+seed%120) * time.Second
		p := Plan{Seed: seed, Duration: d, Faults: AllFaults[:1+seed%int64(len(AllFaults))]}
		ws, err := Schedule(p)
		if err != nil {
			t.Fatal(err)
		}
		q := p.withDefaults()
		seen := map[Fault]bool{}
		for i, w := range ws {
			seen[w.Fault] = true
			if w.Start < q.Lead || w.End() > d-q.Tail {
				t.Fatalf("seed %d: window %d %+v outside [%v, %v]", seed, i, w, q.Lead, d-q.Tail)
			}
			if w.Duration < q.MinLen || w.Duration > q.MaxLen {
				t.Fatalf("seed %d: window %d length %v outside [%v, %v]", seed, i, w.Duration, q.MinLen, q.MaxLen)
			}
			if !slices.Contains(p.Faults, w.Fault) {
				t.Fatalf("seed %d: fault %s not asked for", seed, w.Fault)
			}
			if i > 0 {
				gap := w.Start - ws[i-1].End()
				if gap < q.MinGap || gap > q.MaxGap {
					t.Fatalf("seed %d: gap %v before window %d outside [%v, %v]", seed, gap, i, q.MinGap, q.MaxGap)
				}
			}
		}
		// every fault appears before any repeats, so with enough windows
		// every one asked for appears
		if len(ws) >= len(p.Faults) && len(seen) != len(p.Faults) {
			t.Fatalf("seed %d: %d windows but only %d of %d faults", seed, len(ws), len(seen), len(p.Faults))
		}
	}
}

func TestScheduleEdges(t *testing.T) {
	if ws, err := Schedule(Plan{Seed: 1, Duration: time.Minute}); err != nil || ws != nil {
		t.Fatalf("no faults: %v %v", ws, err)
	}
	for _, p := range []Plan{
		{Duration: 0, Faults: AllFaults},
		{Duration: time.Second, Faults: []Fault{"gremlins"}},
		{Duration: time.Second, Faults: AllFaults, MinLen: 2, MaxLen: 1},
		{Duration: time.Second, Faults: AllFaults, MinGap: 3, MaxGap: 2},
	} {
		if _, err := Schedule(p); err == nil {
			t.Fatalf("plan %+v: want an error", p)
		}
	}
	// too short for any window
	ws, err := Schedule(Plan{Duration: time.Second, Faults: AllFaults, MinLen: time.Second, MaxLen: time.Second})
	if err != nil || len(ws) != 0 {
		t.Fatalf("%v %v", ws, err)
	}
}

func TestParseFaults(t *testing.T) {
	got, err := ParseFaults(" pause-holder, evict ,pause-holder")
	if err != nil || !slices.Equal(got, []Fault{FaultPauseHolder, FaultEvict}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, _ := ParseFaults("all"); !slices.Equal(got, AllFaults) {
		t.Fatalf("all: %v", got)
	}
	if got, err := ParseFaults("none"); err != nil || len(got) != 0 {
		t.Fatalf("none: %v %v", got, err)
	}
	if _, err := ParseFaults("evict,typo"); err == nil || !strings.Contains(err.Error(), `"typo"`) {
		t.Fatalf("typo: %v", err)
	}
}
