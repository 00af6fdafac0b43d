package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"
)

// runner holds what every scenario shares: the run id that keeps keys
// apart from other runs, the sizes, and the progress line.
type runner struct {
	id    string
	sizes sizes

	mu    sync.Mutex
	out   io.Writer
	start time.Time
	last  int // length of the last progress line
}

func newRunner(progress io.Writer, quick bool) *runner {
	r := &runner{id: fmt.Sprintf("%08x", rand.Uint32()), sizes: fullSizes, out: progress, start: time.Now()}
	if quick {
		r.sizes = quickSizes
	}
	return r
}

// key names a key of lock l in scenario s: distinct per run, lock, scenario
// and i. Lock names go through fence.ValidateKey: no braces.
func (r *runner) key(l locker, s string, i int) string {
	return fmt.Sprintf("bench-%s:%s:%s:%d", r.id, l.name, s, i)
}

// progress rewrites the progress line on stderr.
func (r *runner) progress(scenario, lock string, i, n int) {
	r.status(fmt.Sprintf("%-12s %-10s %d/%d", scenario, lock, i, n))
}

func (r *runner) status(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := fmt.Sprintf("perf %6.1fs  %s", time.Since(r.start).Seconds(), msg)
	pad := max(0, r.last-len(line))
	fmt.Fprintf(r.out, "\r%s%*s", line, pad, "")
	r.last = len(line)
}

// done ends the progress line.
func (r *runner) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "\r%*s\r", r.last, "")
	fmt.Fprintf(r.out, "perf: done in %.1fs\n", time.Since(r.start).Seconds())
}
