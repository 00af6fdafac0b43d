package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// safetyConfig is the sizes of one run.
type safetyConfig struct {
	ttl    time.Duration
	rounds int // faulted rounds per cell
	extra  int // unfaulted cycles by B after each round
	runID  string
	dsn    string
	db     *pgxpool.Pool // the checker's pool; also takes the epochs
	status func(string)
}

// cellEnv is one lock kind in one scenario.
type cellEnv struct {
	cfg      *safetyConfig
	sc       scenario
	kind     LockInfo
	ttl      time.Duration
	topo     *topology
	resource string
	pgProxy  *faultProxy // delayDB: A's Postgres link
	// cut is A's own links to the nodes it is partitioned from in a
	// node-fault round (quorum kinds only): proxies only A dials.
	cut    []*faultProxy
	a, b   *worker // a is nil when A runs as a process
	cycles []cycle
}

// newPool opens a small pool to dsn, through addr when it is not "".
func newPool(ctx context.Context, dsn, addr string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	if addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		p, _ := strconv.Atoi(port)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
		cfg.ConnConfig.Fallbacks = nil
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// runCell runs every round of one lock kind in one scenario and checks the
// data.
func runCell(ctx context.Context, cfg *safetyConfig, sc scenario, kind LockInfo) SafetyResult {
	start := time.Now()
	res := SafetyResult{Scenario: sc.info.Name, Lock: kind.Name}
	c := &cellEnv{cfg: cfg, sc: sc, kind: kind, ttl: cfg.ttl,
		resource: fmt.Sprintf("safety-%s-%s-%s", cfg.runID, sc.info.Name, kind.Name)}
	err := c.run(ctx)
	if c.topo != nil {
		c.topo.close()
	}
	t, cerr := checkResource(context.WithoutCancel(ctx), cfg.db, c.resource, c.cycles)
	res.Ops, res.Acked, res.Rejected, res.Failed = t.ops, t.acked, t.rejected, t.failed
	res.LostUpdates, res.StaleAccepted, res.Overlaps = t.lost, t.stale, t.overlaps
	res.Anomalies = t.lost + t.stale
	res.Cycles = c.cycles
	for _, cy := range c.cycles {
		if cy.Healed {
			res.Healed++
		}
	}
	if err = errors.Join(err, cerr); err != nil {
		res.Error = err.Error()
	}
	res.Seconds = math.Round(time.Since(start).Seconds()*1000) / 1000
	return res
}

func (c *cellEnv) run(ctx context.Context) (err error) {
	c.topo, err = startTopology(ctx, c.kind.Nodes, c.sc.failover)
	if err != nil {
		return fmt.Errorf("starting redis: %w", err)
	}
	if err := newResource(ctx, c.cfg.db, c.resource); err != nil {
		return err
	}
	mk := func(id, viaAddr string, addrs []string) (*worker, func(), error) {
		k, err := newLockKind(c.kind.Name, addrs, c.ttl)
		if err != nil {
			return nil, nil, err
		}
		p, err := newPool(ctx, c.cfg.dsn, viaAddr)
		if err != nil {
			k.close()
			return nil, nil, err
		}
		w, err := newWorker(id, k, p, c.cfg.db, c.resource)
		if err != nil {
			p.Close()
			k.close()
			return nil, nil, err
		}
		return w, func() { p.Close(); k.close() }, nil
	}
	var closeB func()
	if c.b, closeB, err = mk("B", "", c.topo.addrs()); err != nil {
		return err
	}
	defer closeB()
	if !c.sc.process {
		via := ""
		if c.sc.delayDB {
			pg, err := pgAddr(c.cfg.dsn)
			if err != nil {
				return err
			}
			if c.pgProxy, err = startProxy(pg); err != nil {
				return err
			}
			defer c.pgProxy.Close()
			via = c.pgProxy.Addr()
		}
		addrs := c.topo.addrs()
		if c.sc.nodeFault {
			for i, s := range c.topo.cutOff() {
				px, err := startProxy(s.addr())
				if err != nil {
					return err
				}
				defer px.Close()
				c.cut = append(c.cut, px)
				addrs[len(addrs)-len(c.topo.cutOff())+i] = px.Addr()
			}
		}
		var closeA func()
		if c.a, closeA, err = mk("A", via, addrs); err != nil {
			return err
		}
		defer closeA()
	}
	for r := 1; r <= c.cfg.rounds; r++ {
		c.cfg.status(fmt.Sprintf("%-13s %-25s round %d/%d", c.sc.info.Name, c.kind.Name, r, c.cfg.rounds))
		if err := c.round(ctx, r); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		for range c.cfg.extra {
			c.cycles = append(c.cycles, c.b.run(ctx, time.Time{}, nil))
		}
	}
	return nil
}

// pgAddr is the TCP address of the PostgreSQL in dsn.
func pgAddr(dsn string) (string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	h := cfg.ConnConfig.Host
	if strings.HasPrefix(h, "/") {
		return "", fmt.Errorf("the delayed-write scenario needs PostgreSQL over TCP, not the socket %s", h)
	}
	return net.JoinHostPort(h, strconv.Itoa(int(cfg.ConnConfig.Port))), nil
}

// blackhole is an address nothing listens on: a partitioned link dials it
// and is refused.
const blackhole = "127.0.0.1:1"

// holderA is holder A of one round, in this process or another.
type holderA struct {
	ready   chan struct{} // closed when A is held up right before its write
	done    chan cycle    // A's cycle, once it ends
	proceed func() error  // lets A write
}

func (c *cellEnv) startA(ctx context.Context, round int) (*holderA, error) {
	if c.sc.process {
		return startProcessA(ctx, c, round)
	}
	a := &holderA{ready: make(chan struct{}), done: make(chan cycle, 1)}
	release := make(chan struct{})
	var once sync.Once
	a.proceed = func() error { once.Do(func() { close(release) }); return nil }
	go func() {
		a.done <- c.a.run(ctx, time.Time{}, func(h hold) {
			close(a.ready)
			var tick <-chan time.Time
			if c.sc.keepAlive {
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
					h.refresh(rctx)
					cancel()
				}
			}
		})
	}()
	return a, nil
}

// round runs one faulted round: see scenario.
func (c *cellEnv) round(ctx context.Context, round int) (err error) {
	sc := c.sc
	if sc.prepare != nil {
		if err := sc.prepare(ctx, c); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	// The partition: A cannot reach the last two of five nodes. Its own
	// links to them drop every connection and refuse new ones (a paused
	// node would not do: it runs A's queued requests when it resumes).
	cut := c.cut
	if !sc.nodeFault {
		cut = nil
	}
	for _, px := range cut {
		px.SetTarget(blackhole)
	}
	heal := func() {
		for i, px := range cut {
			px.SetTarget(c.topo.cutOff()[i].addr())
		}
		cut = nil
	}
	defer heal()

	a, err := c.startA(ctx, round)
	if err != nil {
		return err
	}
	var ac, bc cycle
	aEnded := false
	defer func() {
		if !aEnded {
			a.proceed()
			ac = <-a.done
		}
		c.cycles = append(c.cycles, ac)
	}()
	reached := false // A got as far as its write
	var aCalled time.Time
	select {
	case <-a.ready:
		reached = true
		if c.a != nil {
			aCalled = time.Unix(0, c.a.called.Load())
		}
	case ac = <-a.done:
		aEnded = true // A did not get as far as its write (e.g. rejected at its claim)
	case <-ctx.Done():
		return ctx.Err()
	}
	heal()

	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch {
	case sc.process, sc.handover:
		err = wait(c.ttl + margin(c.ttl))
	case sc.delayDB:
		c.pgProxy.Delay(2 * c.ttl)
		defer c.pgProxy.Delay(0)
		a.proceed()
		if !aEnded {
			wctx, cancel := context.WithTimeout(ctx, c.ttl)
			err = c.pgProxy.WaitHeld(wctx, 1)
			cancel()
		}
	case sc.inject != nil:
		err = sc.inject(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("fault: %w", err)
	}

	if sc.handover {
		bReady, bGo := make(chan struct{}), make(chan struct{})
		bDone := make(chan cycle, 1)
		go func() {
			bDone <- c.b.run(ctx, time.Time{}, func(hold) {
				close(bReady)
				<-bGo
			})
		}()
		select {
		case <-bReady:
			a.proceed()
			if !aEnded {
				ac, aEnded = <-a.done, true
			}
			close(bGo)
			bc = <-bDone
		case bc = <-bDone:
		}
		c.cycles = append(c.cycles, bc)
	} else {
		// After a node fault B must get the lock before A's would have
		// expired by itself (A called acquire before the server set its
		// TTL): only the fault can have freed it. With A's keep-alive
		// running, nothing but the fault frees it at all.
		var by time.Time
		if sc.nodeFault && !sc.keepAlive && !aCalled.IsZero() {
			by = aCalled.Add(c.ttl)
		}
		bc = c.b.run(ctx, by, nil)
		c.cycles = append(c.cycles, bc)
	}
	a.proceed()
	if !aEnded {
		ac, aEnded = <-a.done, true
	}
	if sc.restore != nil {
		if err := sc.restore(ctx, c); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return staged(sc, c.ttl, reached, ac, bc)
}

// staged checks that a round staged the race it was meant to: A reached
// its write, B got the lock (within its deadline), A was held up past the
// TTL where the scenario says so, and A's write came after B's (before it,
// in the handover). A round that did not is void: an error, never a clean
// cell.
func staged(sc scenario, ttl time.Duration, reached bool, a, b cycle) error {
	if !reached {
		return fmt.Errorf("holder A did not reach its write (%s: %s): the round is void", a.Outcome, a.Err)
	}
	if b.Outcome == outNoLock {
		return fmt.Errorf("holder B got no lock (%s): the fault did not free it; the round is void", b.Err)
	}
	if (sc.process || sc.handover) && a.Stalled < int64(ttl) {
		return fmt.Errorf("holder A was held up %v, less than the TTL %v: the round is void", time.Duration(a.Stalled), ttl)
	}
	first, second := b, a
	if sc.handover {
		first, second = a, b
	}
	if second.End < first.End {
		return fmt.Errorf("%s's write returned before %s's: the round is void", second.Worker, first.Worker)
	}
	return nil
}

// workerEnv is the environment variable that makes the bench binary (or
// its test binary) run one cycle as holder A and exit: its value is a
// workerSpec in JSON.
const workerEnv = "FENCELOCK_SAFETY_WORKER"

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
func startProcessA(ctx context.Context, c *cellEnv, round int) (*holderA, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, _ := json.Marshal(workerSpec{Kind: c.kind.Name, Addrs: c.topo.addrs(), DSN: c.cfg.dsn,
		Resource: c.resource, TTL: c.ttl.String(), ID: fmt.Sprintf("A%d", round)})
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
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
	a := &holderA{ready: make(chan struct{}), done: make(chan cycle, 1)}
	var once sync.Once
	a.proceed = func() error {
		var err error
		once.Do(func() { err = cmd.Process.Signal(syscall.SIGCONT) })
		return err
	}
	go func() {
		var cy cycle
		got := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == stoppedLine:
				// Only a process seen stopped counts: a SIGCONT sent
				// before the stop lands would leave it stopped for good.
				if waitStopped(ctx, cmd.Process.Pid) {
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
			cy = cycle{Worker: fmt.Sprintf("A%d", round), Outcome: outFailed,
				Err: fmt.Sprintf("worker process: %v: %s", werr, strings.TrimSpace(stderr.String()))}
		}
		a.done <- cy
	}()
	return a, nil
}

// waitStopped waits until process pid is in state T (stopped), for at
// most 5 s; it reports whether it saw it so.
func waitStopped(ctx context.Context, pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces; the state follows the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'T' {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return false
}

// runWorkerProcess is the child's side of startProcessA.
func runWorkerProcess(spec string) error {
	var ws workerSpec
	if err := json.Unmarshal([]byte(spec), &ws); err != nil {
		return fmt.Errorf("%s: %w", workerEnv, err)
	}
	ttl, err := time.ParseDuration(ws.TTL)
	if err != nil {
		return err
	}
	ctx := context.Background()
	k, err := newLockKind(ws.Kind, ws.Addrs, ttl)
	if err != nil {
		return err
	}
	defer k.close()
	p, err := newPool(ctx, ws.DSN, "")
	if err != nil {
		return err
	}
	defer p.Close()
	w, err := newWorker(ws.ID, k, p, p, ws.Resource)
	if err != nil {
		return err
	}
	// kill(2) returns before the whole process has stopped, and this
	// thread could send the write in between: wait for the SIGCONT that
	// only comes after the stop.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	cy := w.run(ctx, time.Time{}, func(hold) {
		fmt.Println(stoppedLine)
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-cont
	})
	b, _ := json.Marshal(cy)
	fmt.Printf("cycle %s\n", b)
	return nil
}
