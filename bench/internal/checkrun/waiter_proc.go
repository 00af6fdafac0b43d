package checkrun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The parent's handle on a waiter process (waiter.go is the process's own
// side): starting it, reading its lines, telling and signalling it, waiting
// for it and killing it.

// waiterProc is the parent's handle on a waiter process.
type waiterProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string   // its stdout, line by line; closed at EOF
	exited chan struct{} // closed once it exited
	gone   time.Time     // when Wait returned
	werr   error
	stderr bytes.Buffer // read only after exited
}

// startWaiter starts a waiter process (this binary again) with spec. It
// does not wait for it to be ready: see expect.
func startWaiter(spec waiterSpec) (*waiterProc, error) { return startChild(WaiterEnv, spec, 16) }

// startChild starts this binary again with env set to spec in JSON: a
// waiter process, or the election workload's leader. Its stdout lines
// queue up to buffered.
func startChild(env string, spec any, buffered int) (*waiterProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	p := &waiterProc{lines: make(chan string, buffered), exited: make(chan struct{})}
	p.cmd = exec.Command(exe)
	p.cmd.Env = append(os.Environ(), env+"="+string(b))
	// Its own process group, so that no job-control signal meant for ours
	// reaches it, and killed if we die.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.werr = p.cmd.Wait()
		p.gone = time.Now()
		close(p.exited)
	}()
	return p, nil
}

// next returns the process's next line, waiting at most timeout.
func (p *waiterProc) next(timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.exited
			return "", fmt.Errorf("waiter process exited (%v): %s", p.werr, strings.TrimSpace(p.stderr.String()))
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("waiter process: no word in %v", timeout)
	}
}

// expect waits for the next line to be one of want (a line may carry a
// payload after a space) and returns it.
func (p *waiterProc) expect(timeout time.Duration, want ...string) (string, error) {
	l, err := p.next(timeout)
	if err != nil {
		return "", err
	}
	for _, w := range want {
		if l == w || strings.HasPrefix(l, w+" ") {
			return l, nil
		}
	}
	return l, fmt.Errorf("waiter process said %q, want %s", l, strings.Join(want, " or "))
}

// result parses a result line.
func parseResult(line string) (waiterResult, error) {
	var r waiterResult
	err := json.Unmarshal([]byte(strings.TrimPrefix(line, lineResult+" ")), &r)
	return r, err
}

func (p *waiterProc) send(cmd string) error {
	_, err := io.WriteString(p.stdin, cmd+"\n")
	return err
}

func (p *waiterProc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// wait waits at most timeout for the process to exit.
func (p *waiterProc) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// kill ends the process (stopped or not) and reaps it.
func (p *waiterProc) kill() {
	p.cmd.Process.Kill()
	p.stdin.Close()
	for range p.lines { // drain, so that the reader reaches Wait
	}
	<-p.exited
}

var errNotReady = errors.New("waiter process not ready")

// startWaiters starts one waiter process per spec, and kills the ones
// started if one fails.
func startWaiters(specs []waiterSpec) ([]*waiterProc, error) {
	var out []*waiterProc
	for _, s := range specs {
		p, err := startWaiter(s)
		if err != nil {
			killAll(out)
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func killAll(ps []*waiterProc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.kill() }()
	}
	wg.Wait()
}
