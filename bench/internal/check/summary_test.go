package check

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	h, final := cleanHistory()
	sched := []Window{{Start: ms(5), Duration: ms(3), Fault: FaultEvict}}
	lin := CheckLinearizable(h, LinearOptions{})
	lin.Skipped = 4
	lost := CheckLostUpdates(h, Final{Registers: final.Registers}, nil) // set missing: skipped
	fm := Result{Checker: CheckerFencedMutex, Anomalies: make([]Anomaly, 2)}
	s := Summarize("redis-lease", true, 99, h, sched, fm, lost, lin)
	want := Summary{Kind: "redis-lease", Fenced: true, Seed: 99, Duration: ms(37), Clients: 4, Faults: 1,
		Ops: 15, Acked: 11, Rejected: 1, Failed: 1, Unknown: 2}
	got := s
	got.Anomalies, got.Undecided = nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("summary\n got %+v\nwant %+v", got, want)
	}
	if fmt.Sprint(s.Anomalies) != "map[fenced-mutex:2 linearizable:0 lost-update:0]" ||
		fmt.Sprint(s.Undecided) != "map[linearizable:4 lost-update:5]" || s.TotalAnomalies() != 2 {
		t.Fatalf("anomalies %v undecided %v", s.Anomalies, s.Undecided)
	}
}

func TestWriteTable(t *testing.T) {
	sums := []Summary{
		{Kind: "pg_guarded_withtx", Fenced: true, Seed: 7, Ops: 1200, Acked: 1100, Rejected: 60, Failed: 30, Unknown: 10, Faults: 9,
			Anomalies: map[string]int{CheckerFencedMutex: 0, CheckerLostUpdate: 0, CheckerLinearizable: 0, CheckerExclusion: 1, CheckerLiveness: 0},
			Undecided: map[string]int{CheckerLinearizable: 3}},
		{Kind: "setnx-getset", Seed: 7, Ops: 900, Acked: 880, Unknown: 20, Faults: 9,
			Anomalies: map[string]int{CheckerFencedMutex: 4, CheckerLostUpdate: 12}},
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, sums); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want header, 2 rows, notes:\n%s", out)
	}
	fields := func(i int) string { return strings.Join(strings.Fields(lines[i]), " ") }
	if got := fields(0); got != "lock ops acked rejected failed unknown fenced-mutex lost-update linearizable permits exclusion liveness faults seed" {
		t.Fatalf("header %q", got)
	}
	if got := fields(1); got != "pg_guarded_withtx* 1200 1100 60 30 10 0 0 0? — 1! 0 9 7" {
		t.Fatalf("row 1 %q", got)
	}
	if got := fields(2); got != "setnx-getset 900 880 0 0 20 4! 12! — — — — 9 7" {
		t.Fatalf("row 2 %q", got)
	}
	if !strings.Contains(lines[3], "? part of the history undecided") || !strings.Contains(lines[3], "* fenced") {
		t.Fatalf("notes %q", lines[3])
	}
	// columns line up: right-aligned numbers end at the same offset
	if len([]rune(lines[0])) != len([]rune(lines[1])) || len([]rune(lines[1])) != len([]rune(lines[2])) {
		t.Fatalf("ragged table:\n%s", out)
	}
}

func timelineRun(t *testing.T) Run {
	t.Helper()
	h, final := cleanHistory()
	sched := []Window{
		{Start: ms(3), Duration: ms(6), Fault: FaultPauseHolder},
		{Start: ms(20), Duration: ms(5), Fault: FaultRestartRedis, Target: 3},
	}
	final.Sets["set"] = []int64{100, 102, 103} // lose 101
	res := []Result{CheckFencedMutex(h), CheckLostUpdates(h, final, nil), CheckLinearizable(h, LinearOptions{})}
	return Run{Summary: Summarize("redis<lease>", true, 5, h, sched, res...), Schedule: sched, Results: res, Final: final, History: h}
}

func TestTimelineHTML(t *testing.T) {
	run := timelineRun(t)
	var buf bytes.Buffer
	if err := WriteTimeline(&buf, "check <run>", []Run{run}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()

	for _, w := range run.Schedule {
		if !strings.Contains(page, fmt.Sprintf(`<g class="fault" data-fault="%s">`, w.Fault)) {
			t.Fatalf("fault window %s not drawn", w.Fault)
		}
	}
	if n := strings.Count(page, `<g class="fault"`); n != 2 {
		t.Fatalf("%d fault windows drawn, want 2", n)
	}
	lost := 6 // the append of 101
	if run.History.Ops[lost].Value != 101 {
		t.Fatal("fixture changed")
	}
	marks := regexp.MustCompile(`<g class="anomaly" data-op="(\d+)">`).FindAllStringSubmatch(page, -1)
	if len(marks) != 1 || marks[0][1] != fmt.Sprint(lost) {
		t.Fatalf("anomaly marks %v, want op %d only", marks, lost)
	}
	if !strings.Contains(page, "<summary>2 fault windows</summary>") || !strings.Contains(page, "<summary>1 anomaly</summary>") {
		t.Fatal("table summaries missing or misspelled")
	}
	if strings.Count(page, `class="anomaly-row"`) != 1 || !strings.Contains(page, "lost-append") {
		t.Fatal("anomaly table missing")
	}
	if n := strings.Count(page, `<g class="op"`); n != len(run.History.Ops)-1 {
		t.Fatalf("%d plain op bars, want %d", n, len(run.History.Ops)-1)
	}
	for _, lane := range []string{">client 0<", ">client 3<", ">faults<"} {
		if !strings.Contains(page, lane) {
			t.Fatalf("lane label %s missing", lane)
		}
	}
	// escaped, self-contained
	if strings.Contains(page, "<run>") || strings.Contains(page, "redis<lease>") || !strings.Contains(page, "redis&lt;lease&gt;") {
		t.Fatal("text not escaped")
	}
	for _, ext := range []string{"<script", "<link", "src=", "@import", "url("} {
		if strings.Contains(page, ext) {
			t.Fatalf("page not self-contained: %s", ext)
		}
	}
	// the SVG is well-formed XML, sized for 1200 px pages
	svg := page[strings.Index(page, "<svg") : strings.Index(page, "</svg>")+len("</svg>")]
	if !strings.Contains(svg, `viewBox="0 0 1160 `) {
		t.Fatal("svg not laid out at 1160 units")
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("svg not well-formed: %v", err)
		}
	}
}

func TestTimelineNoAnomaliesNoFaults(t *testing.T) {
	h, final := cleanHistory()
	res := []Result{CheckFencedMutex(h), CheckLostUpdates(h, final, nil), CheckLinearizable(h, LinearOptions{})}
	run := Run{Summary: Summarize("x", true, 1, h, nil, res...), Results: res, History: h}
	var buf bytes.Buffer
	if err := WriteTimeline(&buf, "t", []Run{run}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Contains(page, `class="anomaly"`) || strings.Contains(page, `class="fault"`) ||
		!strings.Contains(page, "No anomalies.") || !strings.Contains(page, "No faults injected.") ||
		!strings.Contains(page, "0 anomalies") {
		t.Fatal("clean run drawn with marks")
	}
}

func TestTimelineHelpers(t *testing.T) {
	for _, c := range []struct {
		span time.Duration
		want time.Duration
	}{{ms(37), ms(5)}, {time.Minute, 10 * time.Second}, {ms(3), ms(1)}, {2 * time.Minute, 20 * time.Second}} {
		if got := niceStep(c.span, 10); got != c.want {
			t.Fatalf("niceStep(%v) = %v, want %v", c.span, got, c.want)
		}
	}
	if fitLabel("pause-holder", 200) != "pause-holder" || fitLabel("pause-holder", 20) != "" ||
		fitLabel("pause-holder", 50) != "pause-…" {
		t.Fatalf("fitLabel: %q %q %q", fitLabel("pause-holder", 200), fitLabel("pause-holder", 20), fitLabel("pause-holder", 50))
	}
	if fmtDur(0) != "0" || fmtDur(2*time.Second) != "2s" || fmtDur(ms(1500)) != "1.5s" || fmtDur(ms(1005)) != "1.005s" || fmtDur(ms(20)) != "20ms" {
		t.Fatal("fmtDur")
	}
}

func TestTimelineCapsAnomalyRows(t *testing.T) {
	run := timelineRun(t)
	many := make([]Anomaly, maxRows+5)
	for i := range many {
		many[i] = Anomaly{Checker: CheckerLostUpdate, Kind: AnomalyLostAppend, Ops: []int{0}}
	}
	run.Results = []Result{{Checker: CheckerLostUpdate, Anomalies: many}}
	var buf bytes.Buffer
	if err := WriteTimeline(&buf, "t", []Run{run}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), `class="anomaly-row"`); n != maxRows || !strings.Contains(buf.String(), "… 5 more in the JSON report") {
		t.Fatalf("%d rows", n)
	}
}
