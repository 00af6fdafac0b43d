package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// fakeClock advances 1 ms per reading.
func fakeClock() func() time.Duration {
	var n atomic.Int64
	return func() time.Duration { return time.Duration(n.Add(1)) * time.Millisecond }
}

func TestRecorderOutcomes(t *testing.T) {
	start := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	r := NewRecorderClock(start, fakeClock())
	ft := fence.Token{Key: "lock", Seq: 9, Holder: "h9"}

	incr := r.Invoke(Op{Client: 0, Holder: "h9", Kind: KindIncr, Resource: "ctr", Token: TokenOf(ft)}) // t=1
	read := r.Invoke(Op{Client: 1, Kind: KindRead, Resource: "ctr"})                                   // t=2
	set := r.Invoke(Op{Client: 1, Kind: KindRead, Resource: "set"})                                    // t=3
	app := r.Invoke(Op{Client: 2, Kind: KindAppend, Resource: "set", Value: 7})                        // t=4
	rej := r.Invoke(Op{Client: 3, Kind: KindAppend, Resource: "set", Value: 8})                        // t=5
	unk := r.Invoke(Op{Client: 4, Kind: KindIncr, Resource: "ctr"})                                    // t=6
	pending := r.Invoke(Op{Client: 5, Kind: KindAppend, Resource: "set", Value: 9})                    // t=7

	incr.Writing(5)
	if !incr.Ok(77) { // t=8
		t.Fatal("first completion refused")
	}
	if incr.Fail(errors.New("late")) || incr.Ok(1) {
		t.Fatal("second completion accepted")
	}
	incr.Writing(999) // ignored once complete
	read.OkRead(false, 4)
	set.OkRead(true)
	app.Fail(errors.New("no lock"))
	rej.Reject(errors.New("stale token"))
	unk.SetToken(tok(10, "h10"))
	unk.Writing(6)
	unk.Unknown(errors.New("timeout"))
	_ = pending

	h := r.History()
	if !h.Start.Equal(start) || len(h.Ops) != 7 {
		t.Fatalf("history %+v", h)
	}
	o := h.Ops
	check := func(i int, want Op) {
		t.Helper()
		got := o[i]
		if got.ID != i || got.Kind != want.Kind || got.Outcome != want.Outcome || got.Value != want.Value ||
			got.Rejected != want.Rejected || got.Commit != want.Commit || got.Error != want.Error || got.Token != want.Token ||
			!reflect.DeepEqual(got.Values, want.Values) {
			t.Fatalf("op %d = %+v\nwant %+v", i, got, want)
		}
		if got.End < got.Start {
			t.Fatalf("op %d ends before it starts: %+v", i, got)
		}
	}
	check(0, Op{Kind: KindIncr, Outcome: Ok, Value: 5, Commit: 77, Token: Token{Key: "lock", Seq: 9, Holder: "h9"}})
	check(1, Op{Kind: KindRead, Outcome: Ok, Value: 4})
	check(2, Op{Kind: KindRead, Outcome: Ok, Values: []int64{}})
	check(3, Op{Kind: KindAppend, Outcome: Fail, Value: 7, Error: "no lock"})
	check(4, Op{Kind: KindAppend, Outcome: Fail, Value: 8, Rejected: true, Error: "stale token"})
	check(5, Op{Kind: KindIncr, Outcome: Unknown, Value: 6, Error: "timeout", Token: tok(10, "h10")})
	check(6, Op{Kind: KindAppend, Outcome: Unknown, Value: 9, Error: "pending when the history was taken"})
	if o[0].Start != ms(1) || o[0].End != ms(8) {
		t.Fatalf("times %v..%v, want 1ms..8ms", o[0].Start, o[0].End)
	}
	if o[0].Token.Fence() != ft || o[0].HolderID() != "h9" || o[5].HolderID() != "h10" {
		t.Fatal("token or holder lost")
	}
	// the snapshot is a copy
	h.Ops[2].Values = append(h.Ops[2].Values, 1)
	if len(r.History().Ops[2].Values) != 0 {
		t.Fatal("history shares memory with the recorder")
	}
}

func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder()
	const clients, each = 8, 200
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				h := r.Invoke(Op{Client: c, Kind: KindAppend, Resource: "set", Value: int64(c*each + i)})
				h.Ok(uint64(i + 1))
			}
		}()
	}
	wg.Wait()
	h := r.History()
	seen := map[int64]bool{}
	for i, op := range h.Ops {
		if op.ID != i || op.Outcome != Ok || seen[op.Value] || op.End < op.Start {
			t.Fatalf("op %d: %+v", i, op)
		}
		seen[op.Value] = true
	}
	if len(seen) != clients*each {
		t.Fatalf("%d ops, want %d", len(seen), clients*each)
	}
}

func TestRunJSONRoundTrip(t *testing.T) {
	h, final := cleanHistory()
	sched, _ := Schedule(Plan{Seed: 3, Duration: time.Minute, Faults: AllFaults})
	results := []Result{CheckFencedMutex(h), CheckLostUpdates(h, final, nil), CheckLinearizable(h, LinearOptions{})}
	results[0].Anomalies = []Anomaly{{Checker: CheckerFencedMutex, Kind: AnomalyStaleToken, Resource: "ctr", Ops: []int{1, 2}, Detail: "x", Count: 1}}
	results[1].Notes = []string{"a note"}
	runs := []Run{{
		Summary:  Summarize("pg-fenced", true, 3, h, sched, results...),
		Schedule: sched, Results: results, Final: final, History: h,
	}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, runs); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"start_ns"`, `"outcome": "unknown"`, `"rejected": true`, `"fault": "pause-holder"`, `"seq": 3`, `"linearizable": 0`} {
		if !strings.Contains(buf.String(), field) {
			t.Fatalf("JSON lacks %s", field)
		}
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, runs) {
		a, _ := json.Marshal(back)
		b, _ := json.Marshal(runs)
		t.Fatalf("round trip differs:\n%s\n%s", a, b)
	}
}
