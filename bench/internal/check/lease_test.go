package check

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRecorderLeases(t *testing.T) {
	start := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	r := NewRecorderClock(start, fakeClock())
	a := r.Acquired(Lease{Client: 0, Lock: "L", Holder: "c0.1", Token: Token{Key: "L", Seq: 4, Holder: "uuid-a"}, Held: true},
		start.Add(50*time.Millisecond)) // t=1
	b := r.Acquired(Lease{Client: 1, Lock: "L", Holder: "c1.1"}, time.Time{}) // t=2: no deadline, no token
	a.Released()                                                              // t=3
	a.Released()                                                              // ignored
	w := r.AddLease(Lease{Client: 16, Lock: "L", Token: Token{Key: "L", Seq: 5, Holder: "uuid-w"},
		Start: ms(60), Deadline: ms(90), Released: ms(70), Held: true, Note: "a waiter process"})
	lv := r.AddLeave(Leave{Client: 17, Lock: "L", How: "sigterm", Queued: ms(1), Left: ms(2), Gone: ms(80),
		Seen: []Seen{{Holder: "uuid-w", Seq: 5, First: ms(61), Last: ms(69)}}})
	r.AddFrozen(Frozen{Client: 16, Lock: "L", Stopped: ms(40), Thawed: ms(59), Handed: Seen{Holder: "uuid-w", First: ms(45), Last: ms(58)}})
	if w != 2 || lv != 0 {
		t.Fatalf("ids %d %d", w, lv)
	}
	if !r.KnownHolder("uuid-a") || !r.KnownHolder("uuid-w") || r.KnownHolder("c1.1") || r.KnownHolder("") {
		t.Fatal("KnownHolder: want the leases' token holders only")
	}
	h := r.History()
	b.Released() // t=4: after the history was taken, not in it
	want := []Lease{
		{ID: 0, Client: 0, Lock: "L", Holder: "c0.1", Token: Token{Key: "L", Seq: 4, Holder: "uuid-a"}, Start: ms(1), Deadline: ms(50), Released: ms(3), Held: true},
		{ID: 1, Client: 1, Lock: "L", Holder: "c1.1", Start: ms(2)},
		{ID: 2, Client: 16, Lock: "L", Token: Token{Key: "L", Seq: 5, Holder: "uuid-w"}, Start: ms(60), Deadline: ms(90), Released: ms(70), Held: true, Note: "a waiter process"},
	}
	if !reflect.DeepEqual(h.Leases, want) {
		t.Fatalf("leases\n got %+v\nwant %+v", h.Leases, want)
	}
	if h.Leases[0].End() != ms(3) || h.Leases[1].End() != 0 || h.Leases[2].End() != ms(70) || h.Leases[1].Judged() {
		t.Fatal("End/Judged")
	}
	if len(h.Frozen) != 1 || h.Frozen[0].Handed.Holder != "uuid-w" {
		t.Fatalf("frozen %+v", h.Frozen)
	}
	if l, ok := r.HolderLease("uuid-w"); !ok || l.ID != 2 {
		t.Fatalf("HolderLease: %+v %v", l, ok)
	}
	if r.LastAcquired("L") != ms(2) || r.LastAcquired("M") != 0 {
		t.Fatalf("LastAcquired %v", r.LastAcquired("L"))
	}
	if len(h.Leaves) != 1 || h.Leaves[0].Gone != ms(80) || h.Span() != ms(80) {
		t.Fatalf("leaves %+v span %v", h.Leaves, h.Span())
	}
	// the history is a copy
	h.Leaves[0].Seen[0].Holder = "changed"
	if r.History().Leaves[0].Seen[0].Holder != "uuid-w" {
		t.Fatal("History shares its leaves' Seen with the recorder")
	}
	// and survives JSON
	var buf bytes.Buffer
	if err := WriteJSON(&buf, []Run{{History: r.History()}}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil || !reflect.DeepEqual(back[0].History.Leases, r.History().Leases) ||
		!reflect.DeepEqual(back[0].History.Leaves, r.History().Leaves) {
		t.Fatalf("JSON round trip: %v", err)
	}
}

func TestTimelineLeases(t *testing.T) {
	var b leases
	b.add(0, 1, "a", 0, 100, 40)
	b.add(1, 2, "b", 50, 150, 0)
	b.add(16, 3, "w", 120, 220, 200) // a waiter process: its own lane
	b.h.Ops = []Op{
		{ID: 0, Client: 0, Holder: "a", Kind: KindIncr, Resource: "r", Value: 1, Start: ms(10), End: ms(20), Outcome: Ok, Commit: 1},
		{ID: 1, Client: 1, Holder: "b", Kind: KindIncr, Resource: "r", Value: 2, Start: ms(60), End: ms(70), Outcome: Ok, Commit: 2},
	}
	b.h.Leaves = []Leave{{Client: 17, Lock: "L", How: "kill", Queued: ms(30), Left: ms(80), Gone: ms(90)}}
	res := []Result{CheckExclusion(b.h, nil), CheckLiveness(b.h, nil, LivenessOptions{TTL: ms(100), TicketTTL: ms(100)})}
	run := Run{Summary: Summarize("lease", false, 1, b.h, nil, res...), Results: res, History: b.h}
	var buf bytes.Buffer
	if err := WriteTimeline(&buf, "t", []Run{run}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, `<g class="lease"`); n != 1 {
		t.Fatalf("%d plain lease windows, want 1", n)
	}
	marks := regexp.MustCompile(`<g class="lease-anomaly" data-lease="(\d+)">`).FindAllStringSubmatch(page, -1)
	if len(marks) != 2 || marks[0][1] != "1" || marks[1][1] != "2" {
		t.Fatalf("lease anomaly marks %v, want leases 1 and 2", marks)
	}
	for _, want := range []string{">waiter 16<", ">waiter 17<", ">client 0<", `<g class="leave">`, "leases #1, #2", "two holders of L at once"} {
		if !strings.Contains(page, want) {
			t.Fatalf("page lacks %q", want)
		}
	}
	svg := page[strings.Index(page, "<svg") : strings.Index(page, "</svg>")+len("</svg>")]
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("svg not well-formed: %v", err)
		}
	}
	js, _ := json.Marshal(run.Results[0].Anomalies)
	if !strings.Contains(string(js), `"leases":[1,2]`) {
		t.Fatalf("anomaly JSON %s", js)
	}
}
