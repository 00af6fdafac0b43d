package check

import (
	"slices"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func tok(seq uint64, holder string) Token { return Token{Key: "lock", Seq: seq, Holder: holder} }

// builder makes synthetic histories; ids are indices.
type builder struct{ ops []Op }

func (b *builder) add(op Op) int {
	op.ID = len(b.ops)
	if op.Holder == "" {
		op.Holder = op.Token.Holder
	}
	if op.Outcome == "" {
		op.Outcome = Ok
	}
	b.ops = append(b.ops, op)
	return op.ID
}

// incr adds an acknowledged incr that wrote value, committed as commit.
func (b *builder) incr(client int, res string, value int64, start, end int, t Token, commit uint64) int {
	return b.add(Op{Client: client, Kind: KindIncr, Resource: res, Value: value, Start: ms(start), End: ms(end), Token: t, Commit: commit})
}

func (b *builder) read(client int, res string, value int64, start, end int) int {
	return b.add(Op{Client: client, Kind: KindRead, Resource: res, Value: value, Start: ms(start), End: ms(end)})
}

func (b *builder) appendOp(client int, res string, elem int64, start, end int, t Token, commit uint64, out Outcome) int {
	return b.add(Op{Client: client, Kind: KindAppend, Resource: res, Value: elem, Start: ms(start), End: ms(end), Token: t, Commit: commit, Outcome: out})
}

func (b *builder) history() History {
	return History{Start: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Ops: slices.Clone(b.ops)}
}

// cleanHistory is a correct fenced run: holders take turns on a counter and
// a set, with a rejected stale write, a failed op, an unknown append that
// landed and an unknown incr that did not, and a concurrent read.
func cleanHistory() (History, Final) {
	var b builder
	b.incr(0, "ctr", 1, 0, 4, tok(1, "a"), 1)
	b.appendOp(0, "set", 100, 4, 6, tok(1, "a"), 2, Ok)
	b.read(3, "ctr", 1, 5, 7)
	b.incr(1, "ctr", 2, 8, 11, tok(2, "b"), 3)
	b.read(3, "ctr", 1, 9, 10) // concurrent with the write of 2: may see 1
	b.add(Op{Client: 0, Kind: KindIncr, Resource: "ctr", Value: 2, Start: ms(9), End: ms(12), Token: tok(1, "a"),
		Outcome: Fail, Rejected: true, Error: "stale token"})
	b.appendOp(1, "set", 101, 11, 13, tok(2, "b"), 4, Ok)
	b.appendOp(2, "set", 102, 14, 20, tok(3, "c"), 0, Unknown) // landed
	b.incr(2, "ctr", 3, 21, 23, tok(3, "c"), 6)
	b.appendOp(2, "set", 103, 23, 24, tok(3, "c"), 7, Ok)
	b.add(Op{Client: 1, Kind: KindAppend, Resource: "set", Value: 104, Start: ms(25), End: ms(26), Outcome: Fail, Error: "lock not acquired"})
	b.add(Op{Client: 1, Kind: KindIncr, Resource: "ctr", Value: 4, Start: ms(27), End: ms(30), Token: tok(4, "d"), Outcome: Unknown}) // never landed
	b.read(3, "ctr", 3, 31, 32)
	b.incr(2, "ctr", 4, 33, 35, tok(5, "e"), 9)
	b.read(3, "ctr", 4, 36, 37)
	return b.history(), Final{
		Registers: map[string]int64{"ctr": 4},
		Sets:      map[string][]int64{"set": {100, 101, 102, 103}},
	}
}

func anomalyKinds(r Result) []string {
	var out []string
	for _, a := range r.Anomalies {
		out = append(out, a.Kind)
	}
	return out
}

func wantNoAnomalies(t *testing.T, r Result) {
	t.Helper()
	if len(r.Anomalies) != 0 {
		t.Fatalf("%s: want no anomalies, got %+v", r.Checker, r.Anomalies)
	}
}

func wantOneAnomaly(t *testing.T, r Result, kind string, ops ...int) Anomaly {
	t.Helper()
	if len(r.Anomalies) != 1 {
		t.Fatalf("%s: want one %s anomaly, got %d: %+v", r.Checker, kind, len(r.Anomalies), r.Anomalies)
	}
	a := r.Anomalies[0]
	if a.Kind != kind || a.Checker != r.Checker {
		t.Fatalf("%s: want kind %s, got %+v", r.Checker, kind, a)
	}
	if ops != nil && !slices.Equal(a.Ops, ops) {
		t.Fatalf("%s: want ops %v, got %v (%s)", r.Checker, ops, a.Ops, a.Detail)
	}
	return a
}
