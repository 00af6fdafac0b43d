package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress is the status line of a running command. On a terminal it
// rewrites one line in place (with \r); written to a file or a pipe it
// prints plain lines instead, one per topic, or per step when every is 0,
// so a log reads line by line.
type Progress struct {
	mu        sync.Mutex
	out       io.Writer
	name      string
	start     time.Time
	tty       bool
	every     time.Duration // plain lines: at most one per topic in this long
	last      int           // length of the line on a terminal
	lastTopic string
	lastAt    time.Time
}

// NewProgress writes the progress of command name to w. every bounds the
// plain lines: a step's line is printed when its topic changed or every
// has passed since the last line (0: every step).
func NewProgress(w io.Writer, name string, every time.Duration) *Progress {
	return &Progress{out: w, name: name, start: time.Now(), tty: IsTerminal(w), every: every}
}

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Step reports what the command does now: topic names the phase (a
// scenario, a cell), detail how far it is.
func (p *Progress) Step(topic, detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := topic
	if detail != "" {
		msg += "  " + detail
	}
	line := strings.TrimRight(fmt.Sprintf("%s %6.1fs  %s", p.name, time.Since(p.start).Seconds(), msg), " ")
	if p.tty {
		fmt.Fprintf(p.out, "\r%s%*s", line, max(0, p.last-len(line)), "")
		p.last = len(line)
		return
	}
	if topic == p.lastTopic && time.Since(p.lastAt) < p.every {
		return
	}
	p.lastTopic, p.lastAt = topic, time.Now()
	fmt.Fprintln(p.out, line)
}

// Done ends the progress with the time the command took.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.out, "\r%*s\r", p.last, "")
	}
	fmt.Fprintf(p.out, "%s: done in %.1fs\n", p.name, time.Since(p.start).Seconds())
}
