package check

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeNamesCheckers: bench/README.md's list of checkers names
// Checkers in order, and each checker's entry names exactly its anomaly
// kinds (Anomalies), which cover every Anomaly constant of this package.
func TestReadmeNamesCheckers(t *testing.T) {
	// Every Anomaly* constant belongs to one checker.
	f, err := parser.ParseFile(token.NewFileSet(), "result.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared, listed []string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if strings.HasPrefix(name.Name, "Anomaly") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						v, _ := strconv.Unquote(lit.Value)
						declared = append(declared, v)
					}
				}
			}
		}
		return true
	})
	for _, c := range Checkers {
		listed = append(listed, Anomalies[c]...)
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) == 0 || !slices.Equal(declared, listed) {
		t.Errorf("Anomaly constants %q, Anomalies lists %q", declared, listed)
	}

	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "**Checkers**")
	if i < 0 {
		t.Fatal("bench/README.md has no **Checkers** list")
	}
	section := readme[i:]
	section = section[:strings.Index(section, "\n\n")]
	entries := regexp.MustCompile("(?m)^- `([a-z-]+)`").FindAllStringSubmatchIndex(section, -1)
	var names []string
	for k, e := range entries {
		end := len(section)
		if k+1 < len(entries) {
			end = entries[k+1][0]
		}
		name, text := section[e[2]:e[3]], section[e[0]:end]
		names = append(names, name)
		var got []string
		for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(text, -1) {
			if slices.Contains(listed, m[1]) && !slices.Contains(got, m[1]) {
				got = append(got, m[1])
			}
		}
		want := slices.Clone(Anomalies[name])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("bench/README.md's %s entry names the anomalies %q; the checker reports %q", name, got, want)
		}
	}
	if !slices.Equal(names, Checkers) {
		t.Errorf("bench/README.md lists the checkers %q; Checkers is %q", names, Checkers)
	}
}
