//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// bin is the fencelock binary TestMain built; redisURL is the throwaway
// Redis most tests share (each test uses lock names of its own).
var bin, redisURL string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if b := os.Getenv(netnsEnv); b != "" {
		// Run again by TestNoRedisGuessed in a network namespace of its
		// own, for that test alone: the binary is built already, and it
		// starts its own Redis.
		bin = b
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "fencelock-cmd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "fencelock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Close()
	redisURL = r.URL()
	return m.Run()
}

// cmdTimeout bounds every fencelock process a test starts.
const cmdTimeout = 30 * time.Second

// result is a finished fencelock process.
type result struct {
	code           int
	stdout, stderr string
}

// proc is a fencelock process started in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	res            result
}

// start starts fencelock with args (no --redis is added) in dir.
func start(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	return startWith(t, dir, append(os.Environ(), "REDIS_URL=", verifierEnv+"="), args...)
}

// startWith is start with the environment env.
func startWith(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		err := p.cmd.Wait()
		p.res = result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.res.code = -1
			p.res.stderr += "\n" + err.Error()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for p to exit.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	<-p.done
	t.Logf("fencelock %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(p.cmd.Args[1:], " "), p.res.code, p.res.stdout, p.res.stderr)
	return p.res
}

// fl runs fencelock with args in dir and waits for it.
func fl(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return start(t, dir, args...).wait(t)
}

// on prefixes args with --redis for the shared Redis.
func on(args ...string) []string { return append([]string{"--redis", redisURL}, args...) }

var lockSeq atomic.Int64

// lockName returns a lock name of the test's own.
func lockName(t *testing.T) string {
	return fmt.Sprintf("test/%s/%d/%d", regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"), os.Getpid(), lockSeq.Add(1))
}

// waitFile waits until path exists and returns its contents.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inspectJSON runs inspect --json with args (which name the Redis).
func inspectJSON(t *testing.T, args ...string) view {
	t.Helper()
	r := fl(t, "", append([]string{"inspect", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("inspect: exit %d: %s", r.code, r.stderr)
	}
	var v view
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
	}
	return v
}

// holder starts `run NAME` whose command writes its token to DIR/token,
// then waits until DIR/stop exists. It returns once the command runs.
func holder(t *testing.T, dir string, args ...string) (*proc, string) {
	t.Helper()
	p := start(t, dir, append(args, "--", "sh", "-c",
		`echo "$FENCE_TOKEN" > token.tmp && mv token.tmp token; while [ ! -f stop ]; do sleep 0.05; done`)...)
	return p, strings.TrimSpace(waitFile(t, filepath.Join(dir, "token")))
}
