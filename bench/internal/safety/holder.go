package safety

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// holderA is holder A of one round, in this process or another.
type holderA struct {
	ready   chan struct{}     // closed when A is held up right before its write
	done    chan report.Cycle // A's cycle, once it ends
	proceed func() error      // lets A write
	ended   bool              // A's cycle was received
	cycle   report.Cycle      // once ended
}

// finish lets A write and waits for its cycle.
func (a *holderA) finish() report.Cycle {
	a.proceed()
	if !a.ended {
		a.cycle, a.ended = <-a.done, true
	}
	return a.cycle
}

// startA starts holder A's cycle of the round.
func (c *cell) startA(ctx context.Context, round int) (*holderA, error) {
	if c.sc.a == sigstop {
		return startProcessA(ctx, c, round)
	}
	a := &holderA{ready: make(chan struct{}), done: make(chan report.Cycle, 1)}
	release := make(chan struct{})
	var once sync.Once
	a.proceed = func() error { once.Do(func() { close(release) }); return nil }
	go func() {
		a.done <- c.a.run(ctx, time.Time{}, func(h locks.Hold) {
			close(a.ready)
			var tick <-chan time.Time
			if c.sc.a == keepAlive {
				t := time.NewTicker(c.ttl / 3)
				defer t.Stop()
				tick = t.C
			}
			for {
				select {
				case <-release:
					return
				case <-ctx.Done():
					return
				case <-tick:
					// A keep-alive: errors are the fault at work.
					rctx, cancel := context.WithTimeout(ctx, c.ttl/3)
					h.Refresh(rctx)
					cancel()
				}
			}
		})
	}()
	return a, nil
}

// WorkerEnv is the environment variable that makes the bench binary (or a
// test binary) run one cycle as holder A and exit: its value is a
// workerSpec in JSON. See RunWorker.
const WorkerEnv = "FENCELOCK_SAFETY_WORKER"

type workerSpec struct {
	Kind     string   `json:"kind"`
	Addrs    []string `json:"addrs"`
	DSN      string   `json:"dsn"`
	Resource string   `json:"resource"`
	TTL      string   `json:"ttl"`
	ID       string   `json:"id"`
}

const stoppedLine = "stopping"

// startProcessA runs holder A as a child process of the same binary, which
// stops itself with SIGSTOP right before its write.
func startProcessA(ctx context.Context, c *cell, round int) (*holderA, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, _ := json.Marshal(workerSpec{Kind: c.kind.Name, Addrs: c.topo.addrs(), DSN: c.cfg.dsn,
		Resource: c.resource, TTL: c.ttl.String(), ID: fmt.Sprintf("A%d", round)})
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(spec))
	// Its own process group: no job-control signal meant for ours (a
	// SIGCONT to an orphaned group that has a stopped member) reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &holderA{ready: make(chan struct{}), done: make(chan report.Cycle, 1)}
	var once sync.Once
	a.proceed = func() error {
		var err error
		once.Do(func() { err = cmd.Process.Signal(syscall.SIGCONT) })
		return err
	}
	go func() {
		var cy report.Cycle
		got := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == stoppedLine:
				// Only a process seen stopped counts: a SIGCONT sent
				// before the stop lands would leave it stopped for good.
				if faults.WaitStopped(ctx, cmd.Process.Pid, 5*time.Second) {
					close(a.ready)
				} else {
					cmd.Process.Kill()
				}
			case strings.HasPrefix(line, "cycle "):
				got = json.Unmarshal([]byte(line[len("cycle "):]), &cy) == nil
			}
		}
		werr := cmd.Wait()
		if !got {
			cy = report.Cycle{Worker: fmt.Sprintf("A%d", round), Outcome: report.Failed,
				Err: fmt.Sprintf("worker process: %v: %s", werr, strings.TrimSpace(stderr.String()))}
		}
		a.done <- cy
	}()
	return a, nil
}

// RunWorker is the child's side of the pause scenario: spec is the value of
// WorkerEnv. It runs one cycle as holder A, stopping itself with SIGSTOP
// right before its write, and prints the cycle as JSON.
func RunWorker(spec string) error {
	var ws workerSpec
	if err := json.Unmarshal([]byte(spec), &ws); err != nil {
		return fmt.Errorf("%s: %w", WorkerEnv, err)
	}
	ttl, err := time.ParseDuration(ws.TTL)
	if err != nil {
		return err
	}
	k, ok := kindNamed(ws.Kind)
	if !ok {
		return fmt.Errorf("unknown lock kind %q", ws.Kind)
	}
	ctx := context.Background()
	cl, err := newClient(k, ws.Addrs, ttl)
	if err != nil {
		return err
	}
	defer cl.close()
	p, err := newPool(ctx, ws.DSN, "")
	if err != nil {
		return err
	}
	defer p.Close()
	w, err := newWorker(ws.ID, cl, p, p, ws.Resource)
	if err != nil {
		return err
	}
	cy := w.run(ctx, time.Time{}, func(locks.Hold) {
		fmt.Println(stoppedLine)
		faults.StopSelf()
	})
	b, _ := json.Marshal(cy)
	fmt.Printf("cycle %s\n", b)
	return nil
}
