package report

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMENamesVerdicts: where bench/README.md explains the verdicts (the
// Targets and Must hold paragraphs), it names exactly the words the report
// prints, as one "a / b / c" list each.
func TestREADMENamesVerdicts(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	paras := regexp.MustCompile(`\n\s*\n`).Split(string(b), -1)
	list := regexp.MustCompile(`\S+(?: / \S+)+`)
	for _, c := range []struct {
		head string
		want []string
	}{
		{"**Targets**", []string{VerdictMet, VerdictMissed, VerdictNA}},
		{"**Must hold**", []string{VerdictOK, VerdictViolated}},
	} {
		var found []string
		for _, p := range paras {
			if strings.HasPrefix(p, c.head) {
				found = append(found, p)
			}
		}
		if len(found) != 1 {
			t.Errorf("README: %d paragraphs begin with %s, want 1", len(found), c.head)
			continue
		}
		lists := list.FindAllString(strings.Join(strings.Fields(found[0]), " "), -1)
		if len(lists) != 1 {
			t.Errorf("README's %s paragraph: verdict lists %q, want one naming %q", c.head, lists, strings.Join(c.want, " / "))
			continue
		}
		if got := strings.Split(lists[0], " / "); !slices.Equal(got, c.want) {
			t.Errorf("README's %s paragraph names the verdicts %q; the report prints %q", c.head, got, c.want)
		}
	}
}
