package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled is wrapped by the error returned when redis-server or the
// PostgreSQL binaries cannot be found. Callers may skip instead of failing:
//
//	if errors.Is(err, testenv.ErrNotInstalled) { ... }
var ErrNotInstalled = errors.New("testenv: server binary not installed")

// ErrClosed is returned by Start and the other methods of a server after its
// Close was called.
var ErrClosed = errors.New("testenv: server closed")

// errAddrInUse marks a start that failed because the port was taken between
// picking and binding; the caller retries on a new port.
var errAddrInUse = errors.New("address already in use")

func notInstalled(what string, err error) error {
	return fmt.Errorf("%w: %s: %v; install it with scripts/deps.sh or `apt-get install -y redis-server postgresql mariadb-server`",
		ErrNotInstalled, what, err)
}

// proc is one child process; done closes when it has exited and been reaped.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the Wait result, valid once done is closed
}

// startProc starts bin in dir with stdout and stderr appended to logPath. The
// child gets its own process group and SIGKILL when this process dies.
func startProc(bin string, args []string, dir, logPath string, cred *syscall.Credential) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("testenv: start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// running reports whether p was started and has not exited yet.
func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process itself (not its group).
func (p *proc) signal(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

// kill sends SIGKILL to the whole process group (server plus any forked
// children) and waits for the server to be reaped.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends sig and waits up to timeout for the process to exit; after that
// it kills the process group and reports that it had to.
func (p *proc) stop(sig syscall.Signal, timeout time.Duration) error {
	if !p.running() {
		return nil
	}
	_ = p.signal(syscall.SIGCONT) // a paused server cannot handle sig
	_ = p.signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("testenv: pid %d ignored %v for %v; killed it", p.cmd.Process.Pid, sig, timeout)
	}
}

// ports holds the ports handed out to live servers of this process, so that
// a stopped server's port is not given to another server before its restart.
var ports = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// freePort returns a free loopback port that ok accepts (nil accepts all) and
// reserves it until releasePort.
func freePort(ok func(int) bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("testenv: find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ports.Lock()
		if !ports.used[port] && (ok == nil || ok(port)) {
			ports.used[port] = true
			ports.Unlock()
			return port, nil
		}
		ports.Unlock()
	}
	return 0, errors.New("testenv: no free port found")
}

func releasePort(port int) {
	ports.Lock()
	delete(ports.used, port)
	ports.Unlock()
}

// portFree reports whether port can be bound on 127.0.0.1 right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// fileSize returns the size of path, 0 when it does not exist yet; a log read
// from this offset shows only what the current run wrote.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logTail returns the last lines of path written after offset, for errors.
func logTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const max = 4 << 10
	if size := fileSize(path); size-offset > max {
		offset = size - max
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, max))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n")
}

// startError builds the error for a server that did not come up, with the
// log tail, and marks it errAddrInUse when the log says the port was taken.
func startError(what, logPath string, offset int64, cause error) error {
	tail := logTail(logPath, offset)
	err := fmt.Errorf("testenv: %s did not become ready: %w\n--- %s (tail) ---\n%s", what, cause, logPath, tail)
	if strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w (%w)", err, errAddrInUse)
	}
	return err
}

// startTimeout bounds how long a server may take to answer after start.
const startTimeout = 15 * time.Second

// onFreePort runs start with a free port, retrying with a new port (up to 5
// times) when the chosen one was taken before the server could bind it.
func onFreePort(start func(port int) error) error {
	for attempt := 1; ; attempt++ {
		port, err := freePort(nil)
		if err != nil {
			return err
		}
		if err = start(port); err == nil || attempt == 5 || !errors.Is(err, errAddrInUse) {
			return err
		}
		releasePort(port)
	}
}
