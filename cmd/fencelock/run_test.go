//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
)

// parseRunOutput parses a command's `echo $FENCE_TOKEN $FENCE_SEQ $FENCE_KEY
// $FENCE_HOLDER` line and checks that the variables agree.
func parseRunOutput(t *testing.T, out, name string) fence.Token {
	t.Helper()
	f := strings.Fields(out)
	if len(f) != 4 {
		t.Fatalf("command printed %q, want TOKEN SEQ KEY HOLDER", out)
	}
	tok, err := fence.Parse(f[0])
	if err != nil {
		t.Fatalf("FENCE_TOKEN %q: %v", f[0], err)
	}
	if tok.Key != name || f[2] != name {
		t.Fatalf("token key %q, FENCE_KEY %q, want %q", tok.Key, f[2], name)
	}
	if strconv.FormatUint(tok.Seq, 10) != f[1] || tok.Holder != f[3] {
		t.Fatalf("FENCE_SEQ %s, FENCE_HOLDER %s disagree with FENCE_TOKEN %s", f[1], f[3], f[0])
	}
	return tok
}

const printToken = `echo "$FENCE_TOKEN" "$FENCE_SEQ" "$FENCE_KEY" "$FENCE_HOLDER"`

func TestRunChildSeesToken(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	r := fl(t, "", on("run", name, "--", "sh", "-c", printToken)...)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	tok := parseRunOutput(t, r.stdout, name)

	// Released when the command exited: the next run gets it at once, with
	// a higher Seq.
	r = fl(t, "", on("run", name, "--", "sh", "-c", printToken)...)
	if r.code != 0 {
		t.Fatalf("second run: exit %d, want 0", r.code)
	}
	if next := parseRunOutput(t, r.stdout, name); next.Seq <= tok.Seq {
		t.Fatalf("second token %v is not above %v", next, tok)
	}
	if v := inspectJSON(t, on(name)...); v.Held || v.Counter < 2 {
		t.Fatalf("after the runs: %+v, want free with counter >= 2", v)
	}
}

func TestRunPassesExitStatus(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 7", 7},
		{"exit 0", 0},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
	} {
		if r := fl(t, "", on("run", name, "--", "sh", "-c", tc.script)...); r.code != tc.want {
			t.Errorf("sh -c %q: exit %d, want %d", tc.script, r.code, tc.want)
		}
	}
	// Global flags after the command name, flags after NAME, and REDIS_URL
	// equivalents are accepted too.
	if r := fl(t, "", "run", name, "--redis", redisURL, "--ttl", "5s", "--", "sh", "-c", "exit 9"); r.code != 9 {
		t.Errorf("flags after NAME: exit %d, want 9", r.code)
	}
}

func TestRunSerialises(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	// Each command logs its start and end; a marker directory catches an
	// overlap even if the log's order were ambiguous.
	script := `mkdir marker || echo OVERLAP >> log
echo "start $FENCE_SEQ" >> log
sleep 0.5
echo "end $FENCE_SEQ" >> log
rmdir marker`
	a := start(t, dir, on("run", "--wait", "20s", name, "--", "sh", "-c", script)...)
	b := start(t, dir, on("run", "--wait", "20s", name, "--", "sh", "-c", script)...)
	for _, p := range []*proc{a, b} {
		if r := p.wait(t); r.code != 0 {
			t.Fatalf("exit %d, want 0", r.code)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 4 {
		t.Fatalf("log:\n%s\nwant 4 lines", log)
	}
	var seqs [4]uint64
	for i, l := range lines {
		word, seq, _ := strings.Cut(l, " ")
		if want := []string{"start", "end"}[i%2]; word != want {
			t.Fatalf("log:\n%s\nline %d is %q, want %s: the commands overlapped", log, i+1, l, want)
		}
		seqs[i], err = strconv.ParseUint(seq, 10, 64)
		if err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
	}
	if seqs[0] != seqs[1] || seqs[2] != seqs[3] || seqs[2] <= seqs[0] {
		t.Fatalf("log:\n%s\nwant one Seq per command, the second above the first", log)
	}
}

func TestRunLeaseLostUnderPause(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	p := start(t, dir, on("run", "--ttl", "1s", "--grace", "5s", name, "--", "sh", "-c", `echo $$ > pid.tmp && mv pid.tmp pid; exec sleep 60`)...)
	child, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	if err != nil {
		t.Fatal(err)
	}
	// Pause fencelock (not the command) past its ttl: its keep-alive stops
	// and the lock expires in Redis while the command goes on.
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	// The limit the docs state: a paused fencelock cannot stop its command,
	// which runs on beside the next holder until fencelock resumes (only
	// the token at the storage protects data then).
	if r := fl(t, "", on("run", name, "--", "true")...); r.code != exitOK {
		t.Fatalf("another run while the first fencelock is paused: exit %d, want 0 (the lock expired)", r.code)
	}
	if err := syscall.Kill(child, 0); err != nil {
		t.Fatalf("the paused fencelock's command (pid %d) ended before fencelock resumed: %v", child, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != exitLost {
		t.Fatalf("exit %d, want %d (lease lost)", r.code, exitLost)
	}
	if !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr %q does not say the lease was lost", r.stderr)
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the command (pid %d) is still there: kill 0: %v", child, err)
	}
	if v := inspectJSON(t, on(name)...); v.Held {
		t.Fatalf("lock still held after the lost run: %+v", v)
	}
}

func TestRunLeaseLostToAnotherHolder(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	p := start(t, dir, on("run", "--ttl", "3s", name, "--", "sh", "-c", `echo $$ > pid.tmp && mv pid.tmp pid; exec sleep 60`)...)
	child, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	if err != nil {
		t.Fatal(err)
	}
	// The lock vanishes from Redis (an eviction, a restart, an operator)
	// and another holder takes it: the first run's next refresh finds it
	// gone.
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Del(t.Context(), "fencelock:{"+name+"}").Err(); err != nil {
		t.Fatal(err)
	}
	other, _ := holder(t, t.TempDir(), on("run", name)...)
	r := p.wait(t)
	if r.code != exitLost || !strings.Contains(r.stderr, "lost") {
		t.Fatalf("exit %d, stderr %q; want %d and the loss reported", r.code, r.stderr, exitLost)
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the command (pid %d) is still there: kill 0: %v", child, err)
	}
	other.cmd.Process.Signal(syscall.SIGTERM)
	other.wait(t)
}

func TestRunHeldExits3(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	h, _ := holder(t, dir, on("run", name)...)

	r := fl(t, dir, on("run", name, "--", "touch", "ran")...)
	if r.code != exitNotAcquired {
		t.Fatalf("--wait 0 while held: exit %d, want %d", r.code, exitNotAcquired)
	}
	r = fl(t, dir, on("run", "--wait", "300ms", name, "--", "touch", "ran")...)
	if r.code != exitNotAcquired {
		t.Fatalf("--wait 300ms while held: exit %d, want %d", r.code, exitNotAcquired)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the command ran without the lock")
	}
	os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	if r := h.wait(t); r.code != 0 {
		t.Fatalf("holder: exit %d", r.code)
	}
}

func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	p := start(t, dir, on("run", name, "--", "sh", "-c",
		`trap 'echo got USR1 > usr1; exit 5' USR1; echo ready > ready; while :; do sleep 0.05; done`)...)
	waitFile(t, filepath.Join(dir, "ready"))
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 5 {
		t.Fatalf("after SIGUSR1: exit %d, want the command's 5", r.code)
	}
	waitFile(t, filepath.Join(dir, "usr1"))

	// SIGTERM reaches the command, which dies of it: 128+15.
	dir = t.TempDir()
	p = start(t, dir, on("run", name, "--", "sh", "-c", `echo ready > ready; exec sleep 60`)...)
	waitFile(t, filepath.Join(dir, "ready"))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("after SIGTERM: exit %d, want %d", r.code, 128+int(syscall.SIGTERM))
	}
	if v := inspectJSON(t, on(name)...); v.Held {
		t.Fatalf("lock held after the command died: %+v", v)
	}
}

func TestRunSignalWhileWaiting(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	dir := t.TempDir()
	h, _ := holder(t, dir, on("run", name)...)
	w := start(t, dir, on("run", "--wait", "20s", name, "--", "touch", "ran")...)
	waitWaiters(t, name, 1, on()...)
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if r := w.wait(t); r.code != 128+int(syscall.SIGINT) {
		t.Fatalf("SIGINT while waiting: exit %d, want %d", r.code, 128+int(syscall.SIGINT))
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the command ran")
	}
	os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	h.wait(t)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"--bogus", "run", "x", "--", "true"},
		{"run"},
		{"run", "x"},
		{"run", "x", "true"},
		{"run", "x", "--"},
		{"run", "--", "true"},
		{"run", "x", "y", "--", "true"},
		{"run", "--ttl", "soon", "x", "--", "true"},
		{"run", "--ttl", "-1s", "x", "--", "true"},
		{"run", "--ttl", "1ms", "x", "--", "true"},
		{"run", "--ttl", "10ms", "x", "--", "true"},
		{"run", "--ttl", "29ms", "x", "--", "true"},
		{"run", "--wait", "-1s", "x", "--", "true"},
		{"run", "--bogus", "x", "--", "true"},
		{"run", "a{b}", "--", "true"},
		{"inspect"},
		{"inspect", "x", "y"},
		{"advance", "x"},
		{"advance", "x", "ten"},
		{"advance", "x", "0"},
		{"--redis", "ftp://127.0.0.1:1", "inspect", "x"},
		{"--prefix", "a{", "inspect", "x"},
		{"--redis", "127.0.0.1:6379", "inspect", "x"},
		{"--redis", "redis+sentinel://127.0.0.1:1", "inspect", "x"},
		{"--redis", "redis://127.0.0.1:1,redis://127.0.0.1:2", "run", "x", "--", "true"}, // two Redlock nodes
		{"--timeout", "0s", "inspect", "x"},
		{"help", "run", "extra"},
	} {
		r := fl(t, "", args...)
		if r.code != exitUsage {
			t.Errorf("fencelock %q: exit %d, want %d", args, r.code, exitUsage)
		}
		// One line saying what is wrong and one saying where the usage is.
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "fencelock: ") ||
			!regexp.MustCompile(`^Run 'fencelock help( (run|inspect|advance|doctor))?' \(or -h\) for usage\.$`).MatchString(lines[1]) {
			t.Errorf("fencelock %q: stderr %q, want one error line and the hint", args, r.stderr)
		}
	}
	// Two URLs: a shell user hears about --redis, not about a Go option.
	r := fl(t, "", "--redis", "redis://127.0.0.1:1,redis://127.0.0.1:2", "run", "x", "--", "true")
	if !strings.Contains(r.stderr, "odd number, at least 3, of --redis") || strings.Contains(r.stderr, "WithForceNodeCount") {
		t.Errorf("two --redis URLs: stderr %q", r.stderr)
	}
	if r := fl(t, "", "run", "x", "true"); !strings.Contains(r.stderr, "fencelock: run: missing -- between NAME and the command\nRun 'fencelock help run' (or -h) for usage.\n") {
		t.Errorf("run without --: stderr %q", r.stderr)
	}
	// A ttl too short for the keep-alive is blamed on the --ttl given,
	// not on a keep-alive interval the user never set.
	for _, ttl := range []string{"10ms", "29ms", "-1s"} {
		r := fl(t, "", on("run", "--ttl", ttl, "x", "--", "true")...)
		if !strings.HasPrefix(r.stderr, "fencelock: run: --ttl "+ttl+" is too short, the shortest is 30ms: ") || strings.Contains(r.stderr, "interval") {
			t.Errorf("--ttl %s: stderr %q", ttl, r.stderr)
		}
	}
	if r := fl(t, "", on("run", "--ttl", "30ms", lockName(t), "--", "true")...); r.code == exitUsage {
		t.Errorf("--ttl 30ms: exit %d, stderr %q; want it accepted", r.code, r.stderr)
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"run", "-h"}, {"help", "run"}} {
		r := fl(t, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Exit status") {
			t.Errorf("fencelock %q: exit %d, stdout %q; want 0 and the help", args, r.code, r.stdout)
		}
	}
}

func TestRunOtherErrors(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	if r := fl(t, "", on("run", name, "--", "no-such-command-fencelock")...); r.code != exitFailure {
		t.Errorf("command not found: exit %d, want %d", r.code, exitFailure)
	}
	closed := "redis://" + testenv.ClosedAddr(t) + "/0"
	if r := fl(t, "", "--redis", closed, "run", name, "--", "true"); r.code != exitFailure {
		t.Errorf("Redis unreachable: exit %d, want %d", r.code, exitFailure)
	}
	if r := fl(t, "", "--redis", closed, "run", "--wait", "1s", name, "--", "true"); r.code != exitFailure || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("Redis unreachable, --wait 1s: exit %d, stderr %q; want %d and the cause", r.code, r.stderr, exitFailure)
	}
	if r := fl(t, "", "--redis", closed, "inspect", name); r.code != exitFailure {
		t.Errorf("inspect, Redis unreachable: exit %d, want %d", r.code, exitFailure)
	}
}
