package docfacts

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// read returns a file of the repository.
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pkgDoc returns the package doc of the package in dir (what go doc
// prints), from its non-test files.
func pkgDoc(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if af.Doc != nil {
			docs = append(docs, af.Doc.Text())
		}
	}
	if len(docs) == 0 {
		t.Fatalf("%s: no package doc", dir)
	}
	return strings.Join(docs, "\n")
}

// flat returns text with comment markers and backticks dropped and every
// run of white space made one space, so phrases can be matched across
// lines.
func flat(text string) string {
	text = regexp.MustCompile(`(?m)^\s*//`).ReplaceAllString(text, " ")
	text = strings.ReplaceAll(text, "`", "")
	return strings.Join(strings.Fields(text), " ")
}

// markdown lists the Markdown files the tests read.
func markdown(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", "bench/README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, rel)
	}
	return out
}

// TestKeys: the docs that list a lock's Redis keys list exactly those of
// protocol.KeysFor, and no doc names a key suffix that does not exist.
func TestKeys(t *testing.T) {
	lock := lease.DefaultPrefix + "{NAME}"
	keys := reflect.ValueOf(protocol.KeysFor(lease.DefaultPrefix, "NAME"))
	var want []string
	for i := range keys.NumField() {
		if f := keys.Type().Field(i); !f.IsExported() || f.Type.Kind() != reflect.String {
			continue // not a key: what the calls reuse (the argument lists)
		}
		k := keys.Field(i).String()
		if !strings.HasPrefix(k, lock) {
			t.Fatalf("key %q does not start with %q", k, lock)
		}
		want = append(want, strings.TrimPrefix(k, lock))
	}
	slices.Sort(want)

	// The lists: one line per key, "PREFIX{NAME}:suffix  what it is".
	line := regexp.MustCompile(`(?m)^\s*(PREFIX|\S*)\{NAME\}(:[a-z]+)?\s`)
	for _, l := range []struct{ dir, prefix string }{
		{"lease", lease.DefaultPrefix},
		{"internal/protocol", "PREFIX"},
	} {
		var got []string
		for _, m := range line.FindAllStringSubmatch(pkgDoc(t, l.dir), -1) {
			if m[1] != l.prefix {
				t.Errorf("go doc ./%s lists key %s{NAME}%s, want the prefix %q", l.dir, m[1], m[2], l.prefix)
			}
			got = append(got, m[2])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("go doc ./%s lists the key suffixes %q; protocol.KeysFor has %q", l.dir, got, want)
		}
	}

	// Mentions anywhere: {NAME}:suffix (also {name}, {job} in examples).
	mention := regexp.MustCompile(`\{(?:NAME|name|job)\}(:[a-z]+)?`)
	places := markdown(t)
	for _, dir := range []string{"lease", "lease/redlock", "internal/protocol", "cmd/fencelock", "lease/doctor"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				rel, _ := filepath.Rel(root, f)
				places = append(places, rel)
			}
		}
	}
	seen := 0
	for _, p := range places {
		for _, m := range mention.FindAllStringSubmatch(read(t, p), -1) {
			seen++
			if !slices.Contains(want, m[1]) {
				t.Errorf("%s names the key %s, which protocol.KeysFor does not make (it has %q)", p, m[0], want)
			}
		}
	}
	if seen < 2*len(want) {
		t.Errorf("only %d key mentions found: the pattern no longer matches the docs", seen)
	}
}

// constant is a string constant declared in a Go file.
type constant struct {
	value string
	typ   string // its declared type's name; "" when untyped
}

// consts returns the string constants declared in a Go file, by name; a
// constant of the form attribute.Key("x") counts as "x".
func consts(t *testing.T, path string) map[string]constant {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, path), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]constant{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			var typ string
			if id, ok := vs.Type.(*ast.Ident); ok {
				typ = id.Name
			}
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				v := vs.Values[i]
				if c, ok := v.(*ast.CallExpr); ok && len(c.Args) == 1 {
					v = c.Args[0]
				}
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					val, _ := strconv.Unquote(lit.Value)
					out[n.Name] = constant{val, typ}
				}
			}
		}
	}
	return out
}

// values returns, sorted, the values of the constants in c for which keep
// reports true.
func values(c map[string]constant, keep func(name string, c constant) bool) []string {
	var out []string
	for n, v := range c {
		if keep(n, v) {
			out = append(out, v.value)
		}
	}
	slices.Sort(out)
	return out
}

// withPrefix returns the values of the constants whose names start with p.
func withPrefix(c map[string]constant, p string) []string {
	return values(c, func(n string, _ constant) bool { return strings.HasPrefix(n, p) })
}

// ofType returns the values of the constants of type typ.
func ofType(c map[string]constant, typ string) []string {
	return values(c, func(_ string, v constant) bool { return v.typ == typ })
}

// TestMetrics: the metric table of docs/operating.md and fenceotel's
// package doc name fenceotel's metrics, spans and attributes and no
// others, and list for each enumerated attribute exactly the values the
// code reports (observe's outcomes, verdicts, kinds and verifier names,
// fenceotel's lease ends).
func TestMetrics(t *testing.T) {
	otel := consts(t, "extra/fenceotel/fenceotel.go")
	obs := consts(t, "observe/observe.go")
	metrics := withPrefix(otel, "Metric")
	known := slices.Concat(metrics, withPrefix(otel, "Span"), withPrefix(otel, "Attr"))
	enums := map[string][]string{
		otel["AttrOutcome"].value:  ofType(obs, "Outcome"),
		otel["AttrVerdict"].value:  ofType(obs, "Verdict"),
		otel["AttrKind"].value:     ofType(obs, "Kind"),
		otel["AttrVerifier"].value: withPrefix(obs, "Verifier"),
		otel["AttrEnd"].value:      withPrefix(otel, "End"),
	}
	verifiers := enums[otel["AttrVerifier"].value]
	for attr, vs := range enums {
		if len(vs) < 2 {
			t.Fatalf("too few values of %s read from the code: %q", attr, vs)
		}
	}
	if len(metrics) < 6 {
		t.Fatalf("too few metrics read from the code: %q", metrics)
	}

	ops := read(t, "docs/operating.md")
	i := strings.Index(ops, "## Metrics and traces")
	j := strings.Index(ops[i+1:], "\n## ")
	if i < 0 || j < 0 {
		t.Fatal("docs/operating.md: no section \"## Metrics and traces\"")
	}
	docs := map[string]string{
		"docs/operating.md (Metrics and traces)": ops[i : i+1+j],
		"go doc ./extra/fenceotel":               pkgDoc(t, "extra/fenceotel"),
	}
	name := regexp.MustCompile(`\bfencelock(?:\.[a-z_]+)+`)
	for where, text := range docs {
		text = flat(text)
		for _, n := range name.FindAllString(text, -1) {
			if !slices.Contains(known, n) {
				t.Errorf("%s names %s, which fenceotel does not define", where, n)
			}
		}
		for _, m := range metrics {
			if !strings.Contains(text, m) {
				t.Errorf("%s does not name the metric %s", where, m)
			}
		}
		for attr, want := range enums {
			lists := regexp.MustCompile(regexp.QuoteMeta(attr)+` \(([^)]*)\)`).FindAllStringSubmatch(text, -1)
			if len(lists) == 0 {
				t.Errorf("%s does not list the values of %s (%s)", where, attr, strings.Join(want, ", "))
			}
			for _, l := range lists {
				got := strings.Split(l[1], ",")
				for k := range got {
					got[k] = strings.TrimSpace(got[k])
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s lists %s (%s); the code reports %q", where, attr, l[1], want)
				}
			}
		}
	}

	// The verifiers' docs name their hook name as `verifier "x"`.
	hook := regexp.MustCompile(`verifier "([a-z-]+)"`)
	found := 0
	_ = filepath.WalkDir(filepath.Join(root, "verifier"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range hook.FindAllStringSubmatch(flat(string(b)), -1) {
			found++
			if !slices.Contains(verifiers, m[1]) {
				t.Errorf("%s names the verifier %q; observe has %q", p, m[1], verifiers)
			}
		}
		return nil
	})
	if found < 3 {
		t.Errorf("only %d verifier names found in verifier/: the pattern no longer matches", found)
	}
}

// TestDefaults: where a doc states an option's default, it states the
// constant's value. Each pattern's group captures the stated value (a
// duration may be written "2 s" or "2s"); each pattern must match.
func TestDefaults(t *testing.T) {
	type place struct{ file, re string }
	facts := []struct {
		name   string
		value  any
		places []place
	}{
		{"lease.DefaultPrefix", lease.DefaultPrefix, []place{
			{"lease/options.go", `\[DefaultPrefix\], "([^"]*)"`},
			{"lease/doc.go", `the default prefix "([^"]*)"`},
			{"cmd/fencelock/doc.go", `keys and channel \(default "([^"]*)"\)`},
		}},
		{"lease.DefaultDriftFactor", lease.DefaultDriftFactor, []place{
			{"lease/options.go", `\[DefaultDriftFactor\], ([0-9.]+)\.`},
			{"lease/redlock/doc.go", `factor ([0-9.]+) by default`},
			{"docs/design.md", `the drift allowance is ttl × ([0-9.]+) \+`},
		}},
		{"lease.DefaultMinBackoff", lease.DefaultMinBackoff, []place{
			{"lease/options.go", `\[DefaultMaxBackoff\], (\w+) and \w+\.`},
		}},
		{"lease.DefaultMaxBackoff", lease.DefaultMaxBackoff, []place{
			{"lease/options.go", `\[DefaultMaxBackoff\], \w+ and (\w+)\.`},
		}},
		{"lease.DefaultCounterTTL", lease.DefaultCounterTTL, []place{
			{"lease/options.go", `\[DefaultCounterTTL\], (\w+)\.`},
			{"lease/doc.go", `expires after WithCounterTTL, (\w+) by default`},
			{"docs/design.md", `it expires (\w+) after the lock's last acquire`},
			{"docs/design.md", `the default (\w+) after the lock's last acquire`},
		}},
		{"protocol.TicketTTL", protocol.TicketTTL, []place{
			{"lease/doc.go", `expires (\w+) after the last ticket`},
			{"lease/doc.go", `plus (\w+) \(a fair waiter's ticket lifetime\)`},
			{"docs/design.md", `gone (\d+ ?\w+) after the waiter stops renewing`},
			{"docs/design.md", `the queue expires (\d+ ?\w+) after its last waiter`},
			{"docs/design.md", `within ttl \+ (\d+ ?\w+) once everyone is gone`},
			{"bench/README.md", `within ttl \+ the (\d+ ?\w+) ticket lifetime`},
		}},
		{"redlock.DefaultNodeTimeout", redlock.DefaultNodeTimeout, []place{
			{"lease/redlock/options.go", `at least \[DefaultNodeTimeout\] \((\w+);`},
			{"lease/redlock/doc.go", `a tenth of the ttl, at least (\w+), by default`},
			{"docs/design.md", `per-node timeout \(default a tenth of the ttl, at least (\d+ ?\w+)\)`},
		}},
	}
	for _, f := range facts {
		for _, p := range f.places {
			text := flat(read(t, p.file))
			ms := regexp.MustCompile(p.re).FindAllStringSubmatch(text, -1)
			if len(ms) == 0 {
				t.Errorf("%s: %s not found; the doc no longer states %s where this test looks", p.file, p.re, f.name)
			}
			for _, m := range ms {
				if !same(f.value, m[1]) {
					t.Errorf("%s states %s as %q; the code has %v", p.file, f.name, m[1], f.value)
				}
			}
		}
	}
}

// same reports whether the stated value s is v.
func same(v any, s string) bool {
	switch v := v.(type) {
	case string:
		return s == v
	case float64:
		f, err := strconv.ParseFloat(s, 64)
		return err == nil && f == v
	case time.Duration:
		d, err := time.ParseDuration(strings.ReplaceAll(s, " ", ""))
		return err == nil && d == v
	}
	return false
}

// TestPackageDocsOpenWithCode: the doc of every public package (the
// module's packages outside internal/ and examples/, and the extra/ modules)
// is one sentence, then a code block of typical use.
func TestPackageDocsOpenWithCode(t *testing.T) {
	dirs := []string{"extra/fencebridge", "extra/fencebridge/redsyncbridge", "extra/fencebridge/redislockbridge",
		"extra/fenceotel", "extra/fencegocron"}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			switch {
			case rel == ".":
			// The go command ignores folders starting with "." or "_" (a
			// README test builds its programs in such a folder meanwhile).
			case strings.HasPrefix(d.Name(), "."), strings.HasPrefix(d.Name(), "_"), d.Name() == "internal", d.Name() == "testdata",
				rel == "examples", rel == "bench", rel == "extra":
				return filepath.SkipDir
			default:
				if gos, _ := filepath.Glob(filepath.Join(p, "*.go")); len(gos) > 0 {
					dirs = append(dirs, rel)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 14 {
		t.Fatalf("only %d public packages found: %q", len(dirs), dirs)
	}
	var parser comment.Parser
	for _, dir := range dirs {
		blocks := parser.Parse(pkgDoc(t, dir)).Content
		first, ok := blocks[0].(*comment.Paragraph)
		if !ok || len(blocks) < 2 {
			t.Errorf("go doc ./%s: does not open with a paragraph and a code block", dir)
			continue
		}
		if _, ok := blocks[1].(*comment.Code); !ok {
			t.Errorf("go doc ./%s: the first sentence is not followed by a code block", dir)
		}
		var text strings.Builder
		for _, x := range first.Text {
			if p, ok := x.(comment.Plain); ok {
				text.WriteString(string(p))
			}
		}
		if s := strings.TrimSpace(text.String()); strings.Contains(s, ". ") || len(s) > 300 {
			t.Errorf("go doc ./%s: the paragraph before the code block is more than one sentence: %q", dir, s)
		}
	}
}

// TestRealisticSeqs: examples in the docs show tokens as fencelock makes
// them. A lock's counter starts from the Redis server's clock in
// microseconds (the counter rule in go doc ./lease), so a real Seq is about
// 1.8e15, never 42.
func TestRealisticSeqs(t *testing.T) {
	const least = 1_000_000_000_000_000 // 1e15: the clock in µs since 2001
	places := markdown(t)
	for _, f := range []string{"lease/doc.go", "lease/redlock/doc.go", "fence/doc.go", "verifier/doc.go",
		"verifier/pgverifier/doc.go", "verifier/sqlverifier/doc.go", "verifier/redisverifier/doc.go",
		"heal/heal.go", "cmd/fencelock/doc.go"} {
		places = append(places, f)
	}
	seq := regexp.MustCompile(`\bSeq:? (\d+)\b|\btoken +(\d+):|\bcounter +(\d+)\b|FENCE_SEQ=(\d+)`)
	for _, p := range places {
		for _, m := range seq.FindAllStringSubmatch(read(t, p), -1) {
			for _, g := range m[1:] {
				if n, err := strconv.ParseUint(g, 10, 64); err == nil && n < least {
					t.Errorf("%s: %q shows a Seq of %d; real ones are about 1.8e15", p, m[0], n)
				}
			}
		}
	}
}

// TestLineWidth: the README and docs/ read in a terminal and in a review
// tool: no prose line over 100 columns (table rows and shell commands in
// code blocks excepted).
func TestLineWidth(t *testing.T) {
	for _, p := range markdown(t) {
		if p == "bench/README.md" {
			continue // the bench's sample output is as the bench prints it
		}
		code := false
		for i, l := range strings.Split(read(t, p), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				code = !code
			}
			if n := len([]rune(l)); n > 100 && !strings.HasPrefix(l, "|") && !code {
				t.Errorf("%s:%d is %d columns wide", p, i+1, n)
			}
		}
	}
}

// TestLuaCommonDocumentsItsFunctions: each function common.lua's comments
// introduce ("-- name is/returns/writes ...") is defined there (a
// documented now_ms that did not exist misled a reader once).
func TestLuaCommonDocumentsItsFunctions(t *testing.T) {
	lua := read(t, "internal/protocol/common.lua")
	var defined []string
	for _, m := range regexp.MustCompile(`(?m)^local function ([a-z_]+)\(`).FindAllStringSubmatch(lua, -1) {
		defined = append(defined, m[1])
	}
	intro := regexp.MustCompile(`(?m)^-- ([a-z]+_[a-z_]+|[a-z]+) (?:is|returns|writes|puts|sends|lets|releases)\b`)
	found := 0
	for _, m := range intro.FindAllStringSubmatch(lua, -1) {
		found++
		if !slices.Contains(defined, m[1]) {
			t.Errorf("common.lua documents %s, which it does not define (it defines %q)", m[1], defined)
		}
	}
	if found < len(defined)/2 {
		t.Errorf("only %d functions introduced in common.lua's comments: the pattern no longer matches", found)
	}
}
