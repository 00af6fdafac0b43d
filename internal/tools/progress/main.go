// Command progress turns the output of `go test -json` into what plain
// `go test` prints, and shows each package's result as soon as it finishes
// (plain `go test` holds results back to print them in package order, so a
// slow package early in the list silences the whole run). scripts/test.sh
// uses it:
//
//	go test -json ./... | go run ./internal/tools/progress
//
// While the tests run it prints, for each package that ends, its status line
// behind the time since the start ("[  1m02s] ok  \tpath\t41.2s"), the
// output of a failed package in full, each line behind "  | ", and after
// 30 s without news the packages still running. At the end it prints
// the summary plain `go test` prints, unprefixed: for every package in
// order, the output of its failed tests and its ok/FAIL/? line, then a last
// "FAIL" line if a package failed. Those closing lines are what CI parsers
// read. With -v (pass it when go test got -v) every output line is kept.
//
// It exits 0 whatever the tests did: the caller takes go test's exit code.
// It exits 1 only when it cannot read its input.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (see `go doc cmd/test2json`).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

type item struct{ test, out string }

type pkg struct {
	path    string
	items   []item
	results map[string]string // test → pass, fail, skip
	status  string            // pass, fail, skip; "" while running
	started bool
}

type filter struct {
	mu       sync.Mutex
	w        io.Writer
	verbose  bool
	start    time.Time
	now      func() time.Time
	last     time.Time // when a line was last printed
	pkgs     map[string]*pkg
	order    []*pkg
	build    []string // build output, in order
	failed   bool
	finished int
}

func newFilter(w io.Writer, verbose bool, now func() time.Time) *filter {
	t := now()
	return &filter{w: w, verbose: verbose, start: t, last: t, now: now, pkgs: map[string]*pkg{}}
}

func (f *filter) pkg(path string) *pkg {
	p := f.pkgs[path]
	if p == nil {
		p = &pkg{path: path, results: map[string]string{}}
		f.pkgs[path] = p
		f.order = append(f.order, p)
	}
	return p
}

func (f *filter) stamp() string {
	s := int(f.now().Sub(f.start).Round(time.Second) / time.Second)
	if s < 60 {
		return fmt.Sprintf("[%6ds] ", s)
	}
	return fmt.Sprintf("[%3dm%02ds] ", s/60, s%60)
}

func (f *filter) printf(format string, args ...any) {
	fmt.Fprintf(f.w, format, args...)
	f.last = f.now()
}

// line handles one input line.
func (f *filter) line(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
		// Not an event (go test prints some things as plain text): pass it on.
		f.printf("%s", b)
		return
	}
	switch e.Action {
	case "build-output":
		f.build = append(f.build, e.Output)
		f.printf("%s", e.Output)
		return
	case "build-fail":
		return
	}
	if e.Package == "" {
		return
	}
	p := f.pkg(e.Package)
	switch e.Action {
	case "start":
		p.started = true
	case "output":
		p.items = append(p.items, item{e.Test, e.Output})
	case "pass", "fail", "skip":
		if e.Test != "" {
			p.results[e.Test] = e.Action
			return
		}
		p.status = e.Action
		f.finished++
		if e.Action == "fail" {
			f.failed = true
		}
		f.progress(p)
	}
}

// framing reports the lines go test -json adds to mark which test is
// running; plain go test, without -v, prints none of them.
func framing(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// text is what plain go test prints for p. Without -v: for a package that
// passed, its status line; for one that failed, the output of the tests that
// did not pass (failed, or never ended: a panic, a timeout) and the
// package's own lines. (go test would also show what tests that passed
// printed with fmt rather than t.Log; -json does not tell the two apart.)
func (f *filter) text(p *pkg) string {
	if !f.verbose && (p.status == "pass" || p.status == "skip") {
		// go test drops all the output of a package that passed, and
		// prints its status line alone ("ok  \tpath\t0.1s").
		for i := len(p.items) - 1; i >= 0; i-- {
			if p.items[i].test == "" {
				return p.items[i].out
			}
		}
	}
	var sb strings.Builder
	for _, it := range p.items {
		if !f.verbose {
			if framing(it.out) {
				continue
			}
			if r := p.results[it.test]; it.test != "" && (r == "pass" || r == "skip") {
				continue
			}
		}
		sb.WriteString(it.out)
	}
	s := sb.String()
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// progress prints p's result as it ends.
func (f *filter) progress(p *pkg) {
	text := f.text(p)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	status := lines[len(lines)-1]
	if p.status == "fail" || f.verbose {
		for _, l := range lines[:len(lines)-1] {
			f.printf("  | %s\n", l)
		}
	}
	f.printf("%s%s\n", f.stamp(), status)
}

// heartbeat prints the packages still running when nothing was printed for
// quiet.
func (f *filter) heartbeat(quiet time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now().Sub(f.last) < quiet {
		return
	}
	var running []string
	for _, p := range f.order {
		if p.started && p.status == "" {
			running = append(running, p.path)
		}
	}
	switch {
	case len(running) == 0:
		f.printf("%sbuilding… (%d packages done)\n", f.stamp(), f.finished)
	default:
		f.printf("%s%d done; still running: %s\n", f.stamp(), f.finished, strings.Join(running, " "))
	}
}

// summary prints, after the last event, what plain go test prints.
func (f *filter) summary() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.printf("%s%d packages done; summary:\n", f.stamp(), f.finished)
	for _, b := range f.build {
		f.printf("%s", b)
	}
	for _, p := range f.order {
		f.printf("%s", f.text(p))
		if p.status == "" {
			// go test ended (killed?) before this package did.
			f.failed = true
			f.printf("FAIL\t%s [no result: go test ended first]\n", p.path)
		}
	}
	if f.failed {
		f.printf("FAIL\n")
	}
}

func run(r io.Reader, w io.Writer, verbose bool, quiet time.Duration) error {
	f := newFilter(w, verbose, time.Now)
	if quiet > 0 {
		done := make(chan struct{})
		defer close(done)
		go func() {
			t := time.NewTicker(quiet / 6)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					f.heartbeat(quiet)
				}
			}
		}()
	}
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			f.line(b)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	f.summary()
	return nil
}

func main() {
	verbose := flag.Bool("v", false, "keep every output line, as go test -v does")
	quiet := flag.Duration("quiet", 30*time.Second, "after this long without news, say which packages still run (0: never)")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	// Lines must reach the terminal as they are printed.
	out := flushWriter{w}
	if err := run(os.Stdin, out, *verbose, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "progress:", err)
		os.Exit(1)
	}
}

type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}
