//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
)

// waitWaiters polls inspect until the lock has want waiters.
func waitWaiters(t *testing.T, name string, want int64, redis ...string) view {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := inspectJSON(t, append(redis, name)...)
		if v.Waiters != nil && *v.Waiters == want {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters: %v, want %d", waiters(v.Waiters), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestInspectHolderAndWaiters(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	h, text := holder(t, dir, on("run", name)...)
	tok, err := fence.Parse(text)
	if err != nil {
		t.Fatal(err)
	}

	v := inspectJSON(t, on(name)...)
	if !v.Held || v.Token != text || v.Holder != tok.Holder || v.Seq != tok.Seq || v.Counter != tok.Seq {
		t.Fatalf("inspect %+v, want held by the run's token %s", v, text)
	}
	if v.TTLms <= 0 || v.TTLms > 30000 {
		t.Fatalf("ttl %dms, want in (0, 30s]", v.TTLms)
	}
	if v.Waiters == nil || *v.Waiters != 0 {
		t.Fatalf("waiters %v, want 0", waiters(v.Waiters))
	}

	wdir := t.TempDir()
	w := start(t, wdir, on("run", "--wait", "20s", name, "--", "sh", "-c", `echo "$FENCE_SEQ" > seq`)...)
	waitWaiters(t, name, 1, on()...)
	r := fl(t, "", on("inspect", name)...)
	for _, want := range []string{"holder    " + tok.Holder, "token     " + text, "counter   " + strconv.FormatUint(tok.Seq, 10), "waiters   1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, r.stdout)
		}
	}

	os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	if r := h.wait(t); r.code != 0 {
		t.Fatalf("holder: exit %d", r.code)
	}
	if r := w.wait(t); r.code != 0 {
		t.Fatalf("waiter: exit %d", r.code)
	}
	seq, err := strconv.ParseUint(strings.TrimSpace(waitFile(t, filepath.Join(wdir, "seq"))), 10, 64)
	if err != nil || seq <= tok.Seq {
		t.Fatalf("waiter's Seq %d (%v), want above %d", seq, err, tok.Seq)
	}
	v = inspectJSON(t, on(name)...)
	if v.Held || v.Counter != seq || *v.Waiters != 0 {
		t.Fatalf("after both runs: %+v, want free, counter %d, no waiters", v, seq)
	}
	if r := fl(t, "", on("inspect", name)...); !strings.Contains(r.stdout, "(free)") {
		t.Errorf("inspect of a free lock:\n%s", r.stdout)
	}
}

func TestAdvance(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	// A missing counter stands at the server's clock (the counter rule):
	// a floor below it does not bring tokens back to 5, 6...
	before := uint64(time.Now().UnixMicro())
	r := fl(t, "", on("advance", name, "5")...)
	if n, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64); r.code != 0 || err != nil || n+1e6 < before {
		t.Fatalf("advance of a missing counter to 5: exit %d, printed %q, want the clock (about %d)", r.code, r.stdout, before)
	}
	floor := before + 1e10 // above the clock (within protocol.MaxAhead)
	want := strconv.FormatUint(floor, 10)
	r = fl(t, "", on("advance", name, want)...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("advance to %s: exit %d, printed %q", want, r.code, r.stdout)
	}
	// An atomic max: a lower floor leaves it.
	r = fl(t, "", on("advance", "--json", name, "5")...)
	if r.code != 0 || !strings.Contains(r.stdout, `"counter": `+want) {
		t.Fatalf("advance to 5: exit %d, printed %q", r.code, r.stdout)
	}
	if v := inspectJSON(t, on(name)...); v.Counter != floor {
		t.Fatalf("counter %d after advance, want %d", v.Counter, floor)
	}
	r = fl(t, "", on("run", name, "--", "sh", "-c", printToken)...)
	if tok := parseRunOutput(t, r.stdout, name); tok.Seq <= floor {
		t.Fatalf("token after advance %v, want Seq > %d", tok, floor)
	}
}

func TestRedlock(t *testing.T) {
	t.Parallel()
	nodes := testenv.NewRedisN(t, 3)
	var flags []string
	var urls []string
	for _, n := range nodes {
		flags = append(flags, "--redis", n.URL())
		urls = append(urls, n.URL())
	}
	comma := []string{"--redis", strings.Join(urls, ",")}
	name := lockName(t)

	r := fl(t, "", append(flags, "run", name, "--", "sh", "-c", printToken)...)
	if r.code != 0 {
		t.Fatalf("run: exit %d", r.code)
	}
	tok := parseRunOutput(t, r.stdout, name)
	if err := tok.Validate(); err != nil { // Seq 0 would be an unfenced token
		t.Fatalf("redlock token %v: %v", tok, err)
	}

	// Held: every node answers and the majority line names the holder.
	dir := t.TempDir()
	h, text := holder(t, dir, append(comma, "run", name)...)
	v := inspectJSON(t, append(comma, name)...)
	if v.Mode != "redlock" || v.Quorum != 2 || len(v.Nodes) != 3 || !v.Held || v.Token != text {
		t.Fatalf("inspect %+v, want redlock held by %s", v, text)
	}
	for _, n := range v.Nodes {
		if !n.Answered || n.Token != text {
			t.Fatalf("node %+v, want it to hold %s", n, text)
		}
	}
	w := start(t, t.TempDir(), append(flags, "run", "--wait", "20s", name, "--", "true")...)
	waitWaiters(t, name, 1, comma...)
	r = fl(t, "", append(comma, "inspect", name)...)
	if strings.Count(r.stdout, "\nnode ") != 3 || !strings.Contains(r.stdout, "majority  holder=") {
		t.Fatalf("inspect output:\n%s", r.stdout)
	}
	os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	h.wait(t)
	if r := w.wait(t); r.code != 0 {
		t.Fatalf("waiter: exit %d", r.code)
	}

	floor := uint64(time.Now().UnixMicro()) + 1e10 // above the nodes' clocks
	r = fl(t, "", append(flags, "advance", name, strconv.FormatUint(floor, 10))...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != strconv.FormatUint(floor, 10) {
		t.Fatalf("advance: exit %d, printed %q", r.code, r.stdout)
	}
	r = fl(t, "", append(flags, "run", name, "--", "sh", "-c", printToken)...)
	if tok := parseRunOutput(t, r.stdout, name); tok.Seq <= floor {
		t.Fatalf("token after advance %v, want Seq > %d", tok, floor)
	}

	// One node of three down: the majority still serves, inspect names the
	// node that failed.
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	r = fl(t, "", append(flags, "run", name, "--", "sh", "-c", printToken)...)
	if tok := parseRunOutput(t, r.stdout, name); r.code != 0 || tok.Seq <= floor+1 {
		t.Fatalf("run with a node down: exit %d, token %v", r.code, tok)
	}
	v = inspectJSON(t, append(flags, name)...)
	if v.Held || v.Counter <= floor+1 || v.Nodes[2].Answered || v.Nodes[2].Error == "" || !v.Nodes[0].Answered {
		t.Fatalf("inspect with a node down: %+v", v)
	}
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	h, text := holder(t, dir, on("--prefix", "other:", "run", name)...)
	if v := inspectJSON(t, on("--prefix", "other:", name)...); v.Token != text {
		t.Fatalf("inspect with the prefix: %+v, want held by %s", v, text)
	}
	if v := inspectJSON(t, on(name)...); v.Held {
		t.Fatalf("inspect with the default prefix: %+v, want free", v)
	}
	if r := fl(t, "", on("run", name, "--", "true")...); r.code != 0 {
		t.Fatalf("run under the default prefix: exit %d", r.code)
	}
	os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	h.wait(t)
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NewCluster(t, 3)
	url := []string{"--redis", "redis+cluster://" + strings.Join(c.Addrs(), ",")}
	name := lockName(t)
	r := fl(t, "", append(url, "run", name, "--", "sh", "-c", printToken)...)
	if r.code != 0 {
		t.Fatalf("run: exit %d", r.code)
	}
	parseRunOutput(t, r.stdout, name)

	dir := t.TempDir()
	h, text := holder(t, dir, append(url, "run", name)...)
	start(t, t.TempDir(), append(url, "run", "--wait", "20s", name, "--", "true")...)
	if v := waitWaiters(t, name, 1, url...); v.Token != text {
		t.Fatalf("inspect %+v, want held by %s", v, text)
	}
	os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	h.wait(t)
}

func TestSplitURLs(t *testing.T) {
	got, err := splitURLs([]string{"redis://a:1/0,redis://b:2/0", "redis+cluster://u:p@c:1,d:2,e:3?dial_timeout=1s", "redis://f:3"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"redis://a:1/0", "redis://b:2/0", "redis+cluster://u:p@c:1,d:2,e:3?dial_timeout=1s", "redis://f:3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("splitURLs: %q, want %q", got, want)
	}
	if got := multiHost("redis", "u:p@c:1,d:2,e:3/0?dial_timeout=1s"); got != "redis://u:p@c:1/0?dial_timeout=1s&addr=d:2&addr=e:3" {
		t.Fatalf("multiHost: %q", got)
	}
	if got := multiHost("redis", "c:1,d:2"); got != "redis://c:1?addr=d:2" {
		t.Fatalf("multiHost: %q", got)
	}
	for _, u := range []string{"redis+cluster://c:1,d:2", "redis+sentinel://s:1,s:2/0?master_name=m&password=x", "redis://a:1/2", "unix:///tmp/r.sock?db=1"} {
		rdb, err := newRedis(u, false)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		rdb.Close()
	}
}

func TestSentinel(t *testing.T) {
	t.Parallel()
	primary, _ := testenv.NewReplicated(t)
	s := testenv.NewSentinel(t, primary, "fencelock-cmd")
	url := []string{"--redis", "redis+sentinel://" + s.Addr() + "/0?master_name=fencelock-cmd"}
	name := lockName(t)
	r := fl(t, "", append(url, "run", name, "--", "sh", "-c", printToken)...)
	if r.code != 0 {
		t.Fatalf("run: exit %d", r.code)
	}
	tok := parseRunOutput(t, r.stdout, name)
	// The lock lives on the primary the sentinel names.
	if v := inspectJSON(t, "--redis", primary.URL(), name); v.Counter != tok.Seq {
		t.Fatalf("primary's counter %d, want %d", v.Counter, tok.Seq)
	}
}
