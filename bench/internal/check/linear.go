package check

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// LinearOptions tunes [CheckLinearizable].
type LinearOptions struct {
	// Init gives the registers' initial values (absent: 0).
	Init map[string]int64
	// Timeout bounds the search for each register (0: 30 s). A register not
	// decided in time is counted in Skipped with a note, not as an anomaly.
	Timeout time.Duration
	// VisualizeDir, if set, receives porcupine's HTML visualization of every
	// register found not linearizable, as linearizability-<resource>.html.
	VisualizeDir string
}

// regIn is the input of a register operation in the porcupine model.
type regIn struct {
	kind    Kind
	value   int64 // incr, write: value written
	unknown bool  // the outcome is unknown: any output, maybe no effect
}

// registerModel is a single integer register; porcupine partitions the
// history by resource, so the state is one int64.
//
//   - read returns the state;
//   - write v sets it;
//   - incr, acknowledged with value v: the state was v-1 and becomes v (the
//     read and the write of a lock-guarded read-modify-write are one step);
//   - incr with unknown outcome: the client read something and may have
//     written v, so it is a blind write of v (or +1 when v is not known).
//
// An operation with an unknown outcome gets a return time after the end of
// the history (porcupine's way to say "+infinity"): it may take effect at
// any point after its invocation, or, being placed last, never visibly.
// Failed operations took no effect and are left out; so are reads whose
// outcome is unknown, which tell nothing.
var registerModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(int64), input.(regIn)
		switch in.kind {
		case KindRead:
			return output.(int64) == s, s
		case KindWrite:
			return true, in.value
		case KindIncr:
			if in.unknown {
				if in.value == 0 {
					return true, s + 1
				}
				return true, in.value
			}
			return s == in.value-1, in.value
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regIn)
		switch {
		case in.kind == KindRead:
			return fmt.Sprintf("read() → %d", output.(int64))
		case in.unknown:
			return fmt.Sprintf("%s(%d) → ?", in.kind, in.value)
		case in.kind == KindIncr:
			return fmt.Sprintf("incr %d→%d", in.value-1, in.value)
		}
		return fmt.Sprintf("%s(%d)", in.kind, in.value)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state.(int64)) },
}

// modelFor is registerModel starting at init.
func modelFor(init int64) porcupine.Model {
	m := registerModel
	m.Init = func() any { return init }
	return m
}

// CheckLinearizable checks that each register (every resource with incr,
// write or register-read ops and no appends) behaves as one atomic register
// under the history's real-time order, with porcupine.
func CheckLinearizable(h History, opt LinearOptions) Result {
	res := Result{Checker: CheckerLinearizable}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	hist := registerHistories(h)
	never := h.Span() + 1 // "+infinity": after every real time in the history
	for _, r := range sortedKeys(hist) {
		ops := hist[r]
		pops := make([]porcupine.Operation, len(ops))
		for i, op := range ops {
			pops[i] = toPorcupine(op, never)
		}
		res.Checked += len(ops)
		model := modelFor(opt.Init[r])
		verdict, info := porcupine.CheckOperationsVerbose(model, pops, opt.Timeout)
		switch verdict {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			res.Skipped += len(ops)
			res.Notes = append(res.Notes, fmt.Sprintf("register %q (%d ops): not decided within %v", r, len(ops), opt.Timeout))
			continue
		}
		a := Anomaly{
			Checker: CheckerLinearizable, Kind: AnomalyNotLinearizable, Resource: r, Count: 1,
			Ops: stuckOps(ops, info),
		}
		a.Detail = fmt.Sprintf("no linearization of %d ops; the longest one stops before %s", len(ops), describeIDs(a.Ops))
		if opt.VisualizeDir != "" {
			path := filepath.Join(opt.VisualizeDir, "linearizability-"+safeName(r)+".html")
			if err := writeVisualization(model, info, path); err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("visualization of %q: %v", r, err))
			} else {
				res.Files = append(res.Files, path)
			}
		}
		res.Anomalies = append(res.Anomalies, a)
	}
	return res
}

// registerHistories picks the register operations, per resource, that the
// model uses.
func registerHistories(h History) map[string][]*Op {
	sets := map[string]bool{}
	for i := range h.Ops {
		if h.Ops[i].Kind == KindAppend || h.Ops[i].Values != nil {
			sets[h.Ops[i].Resource] = true
		}
	}
	out := map[string][]*Op{}
	for i := range h.Ops {
		op := &h.Ops[i]
		if sets[op.Resource] || op.Outcome == Fail || op.Outcome == "" {
			continue
		}
		if op.Kind == KindRead && op.Outcome != Ok {
			continue
		}
		out[op.Resource] = append(out[op.Resource], op)
	}
	return out
}

func toPorcupine(op *Op, never time.Duration) porcupine.Operation {
	in := regIn{kind: op.Kind, value: op.Value, unknown: op.Outcome == Unknown}
	ret := op.End
	if in.unknown {
		ret = never
	}
	var out any = int64(0)
	if op.Kind == KindRead {
		out = op.Value
	}
	return porcupine.Operation{
		ClientId: op.Client, Input: in, Output: out,
		Call: int64(op.Start), Return: int64(ret), Metadata: op.ID,
	}
}

// stuckOps names the operations no linearization could place: the ops
// outside porcupine's longest partial linearization that were invoked
// first — the earliest of them and those invoked before it returned —
// at most five.
func stuckOps(ops []*Op, info porcupine.LinearizationInfo) []int {
	parts := info.PartialLinearizations()
	placed := map[int]bool{}
	if len(parts) > 0 {
		var best []int
		for _, p := range parts[0] {
			if len(p) > len(best) {
				best = p
			}
		}
		for _, i := range best {
			placed[i] = true
		}
	}
	var rest []*Op
	for i, op := range ops { // porcupine ids are indices into the partition
		if !placed[i] {
			rest = append(rest, op)
		}
	}
	slices.SortFunc(rest, func(a, b *Op) int { return int(a.Start - b.Start) })
	var ids []int
	for _, op := range rest {
		if len(ids) > 0 && (op.Start > rest[0].End || len(ids) == 5) {
			break
		}
		ids = append(ids, op.ID)
	}
	return ids
}

func describeIDs(ids []int) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("#%d", id)
	}
	if s == "" {
		return "(none)"
	}
	return s
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if s == "" {
		s = "_"
	}
	return s
}

func writeVisualization(model porcupine.Model, info porcupine.LinearizationInfo, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(model, info, path)
}
