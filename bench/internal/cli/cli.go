// Package cli has what the bench commands share in parsing their flags.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// UsageError is a bad flag or argument of a bench command: main exits
// with status 2 for it, as the fencelock command does.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *UsageError) Unwrap() error { return e.Err }

// Usage marks err as a usage error; nil and flag.ErrHelp (-h: not an
// error for main, which exits 0) pass through.
func Usage(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &UsageError{Err: err}
}

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
