// Package cli has what the bench commands share in parsing their flags.
package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Pick parses a comma-separated list of names, each of which must be known,
// and returns them in the order of known.
func Pick(list string, known []string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown %q (known: %s)", n, strings.Join(known, ","))
		}
		want[n] = true
	}
	var out []string
	for _, n := range known {
		if want[n] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}
