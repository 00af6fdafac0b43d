//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
)

// Exit statuses; the package doc and the help text list them.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitNotAcquired = 3
	exitLost        = 4
)

const (
	defaultPrefix = lease.DefaultPrefix
	// defaultTimeout is --timeout's default: how long inspect, advance and
	// run without --wait may take.
	defaultTimeout = 5 * time.Second
	// defaultTTL is the --ttl default of run and doctor, defaultGrace run's
	// --grace; the help texts and the package doc state them (a test checks).
	defaultTTL   = 30 * time.Second
	defaultGrace = 10 * time.Second
	// finishSlack is how long a command may take past its --wait or
	// --timeout to tell a held lock from an unreachable Redis and to finish
	// its cleanups before it exits.
	finishSlack = 400 * time.Millisecond
)

const usageText = `usage:
  fencelock [global flags] run [--ttl D] [--wait D] [--grace D] [--once-per D | --permits N] NAME -- CMD [ARG...]
  fencelock [global flags] inspect [--json] [--permits N] NAME
  fencelock [global flags] advance [--json] NAME SEQ
  fencelock [global flags] doctor [--json] [FLAGS]  check Redis for what loses locks (doctor --help)
  fencelock [global flags] reset-highwater [--verifier URL] [--rebind] [--yes] NAME RESOURCE
  fencelock [global flags] repair-counter [--yes] NAME
  fencelock help [COMMAND]

Commands:
  run      take lock NAME (with keep-alive) and run CMD with the fencing token in its
           environment: FENCE_TOKEN (SEQ:HOLDER:KEY), FENCE_KEY, FENCE_SEQ, FENCE_HOLDER
           (and FENCE_SLOT with --permits).
           SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to the
           command's process group. If refreshes fail, the command gets SIGTERM early
           enough that SIGKILL, after --grace (cut to ttl/2 - 100ms if longer), lands
           100ms before the lease's deadline; if the lease is lost at once (the lock may
           have another holder already), SIGTERM, then SIGKILL 100ms later.
           The lock is released when the command exits.
             --ttl D     lease ttl (default 30s, at least 30ms, at most 1h); refreshed every ttl/3
             --wait D    how long to wait for the lock (default 0: try once, within --timeout;
                         at most 24h)
                         Budgets: taking the lock and the --once-per claim (at most
                         --timeout of it) end within --wait (or --timeout) + 0.4s; once
                         CMD exits, recording its period and the release take at most
                         5s + 0.4s
             --grace D   SIGTERM to SIGKILL delay (default 10s, at most 1h), shortened as said above
             --once-per D  run CMD at most once per period D: not again until D less D/10
                         after the start of the last run that exited 0, by the Redis
                         server's clock (exit 6); one Redis deployment only; at most
                         87600h (ten years)
             --permits N take a permit of semaphore NAME of N permits (1 to 64) instead
                         of lock NAME: at most N commands run at once, each with the
                         token of its permit's slot: FENCE_KEY is NAME#SLOT, FENCE_SLOT
                         the slot (0 to N-1); one Redis deployment only; not with
                         --once-per
  inspect  print the lock's holder, token, remaining ttl, counter (last Seq) and waiters;
           with Redlock, the majority's view and one line per node
             --json      print JSON
             --permits N print semaphore NAME of N permits instead: each held slot
                         (holder, token, ttl, the slot's counter) and the queue
  advance  lift the lock's counter to at least SEQ and print the counter afterwards
             --json      print JSON
` + resetUsage + repairUsage + `  help     print this help (help COMMAND, or COMMAND -h, prints it too)

Global flags (before or after the command name):
  --redis URL    Redis to use; repeatable or comma-separated (default: $REDIS_URL;
                 with neither, every command but help is a usage error). One URL:
                   redis://[USER:PASS@]HOST[:PORT][/DB][?OPT]   standalone (rediss:// TLS)
                   unix://[USER:PASS@]/PATH.sock[?db=N]         standalone, Unix socket
                   redis+cluster://HOST:PORT[,HOST:PORT...]     Redis Cluster (rediss+cluster://)
                   redis+sentinel://HOST:PORT[,...][/DB]?master_name=M[&password=P]
                                                                Sentinel (rediss+sentinel://)
                 Several URLs (odd, at least 3): Redlock over independent masters, with
                 quorum fencing. OPT: go-redis URL options (dial_timeout=2s, ...); pool_size
                 and the other connection counts 0 to 1000. An empty host is a usage error.
                 Passwords are masked (xxxxx) in every message.
  --prefix P     prefix of the Redis keys and channel (default "` + defaultPrefix + `")
  --timeout D    how long inspect, advance, and run without --wait may take against a
                 slow or unreachable Redis (default 5s, at most 1h)
` + tlsUsage + `
Names with a character that does not print (newline, ...) are usage errors.

Exit status:
  run      the command's exit status when it ran and the lease held (128+N if it
           died of signal N)
  0        inspect, advance, reset-highwater, repair-counter, help succeeded; doctor: all
           checked, no danger finding
  1        other errors (Redis unreachable, command not found, ...)
  2        usage error (bad flags or arguments, no --redis or REDIS_URL; one line
           and a hint on stderr)
  3        run: lock held by another holder, or every permit held (not acquired
           within --wait)
  4        run: lease lost (or being lost) while the command ran (the command was
           terminated)
  4, 5     doctor: a danger finding; a server could not be checked (doctor --help)
  6        run --once-per: a run completed in this period already (CMD did not run)
  128+N    run: fencelock got signal N while waiting for the lock
fencelock's own failures are reported on stderr, prefixed "fencelock: " (a command's
own status of 1 to 6 looks like fencelock's).
`

func main() {
	// go-redis logs dial failures on its own; the errors fencelock reports
	// carry them already.
	redis.SetLogger(quietLogger{})
	os.Exit(fencelock(os.Args[1:], os.Stdout, os.Stderr))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// globals are the flags every command takes.
type globals struct {
	redis   urlList
	prefix  string
	timeout time.Duration
	tls     tlsFlags
	cmd     string // the command being run, for the usage hint
	stdout  io.Writer
	stderr  io.Writer
}

// urlList is the repeatable --redis flag.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }

func (u *urlList) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty URL")
	}
	*u = append(*u, s)
	return nil
}

// flagSet returns a flag set that also takes the global flags.
func (g *globals) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&g.redis, "redis", "Redis URL")
	fs.StringVar(&g.prefix, "prefix", g.prefix, "key prefix")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "operation timeout")
	g.tls.register(fs)
	return fs
}

// usageError reports a usage error: one line, and a hint where the usage
// is, to stderr.
func (g *globals) usageError(format string, args ...any) int {
	fmt.Fprintf(g.stderr, "fencelock: "+format+"\n", args...)
	help := "fencelock help"
	if g.cmd != "" {
		help += " " + g.cmd
	}
	fmt.Fprintf(g.stderr, "Run '%s' (or -h) for usage.\n", help)
	return exitUsage
}

// fail reports an error that is not a usage error.
func (g *globals) fail(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(g.stderr, "fencelock: %s%s\n", msg, tlsHint(msg))
	return code
}

func (g *globals) help() int {
	fmt.Fprint(g.stdout, usageText)
	return exitOK
}

// fencelock runs the command line args and returns the exit status.
func fencelock(args []string, stdout, stderr io.Writer) int {
	g := &globals{prefix: defaultPrefix, timeout: defaultTimeout, stdout: stdout, stderr: stderr}
	fs := g.flagSet("fencelock")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return g.help()
		}
		return g.usageError("%v", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return g.usageError("no command")
	}
	switch rest[0] {
	case "help":
		if len(rest) > 2 {
			return g.usageError("help: want at most one COMMAND, got %d", len(rest)-1)
		}
		if len(rest) == 2 && rest[1] == "doctor" {
			fmt.Fprint(g.stdout, doctorUsage)
			return exitOK
		}
		return g.help()
	case "run", "inspect", "advance", "doctor", "reset-highwater", "repair-counter":
		g.cmd = rest[0]
	}
	switch rest[0] {
	case "run":
		return g.run(rest[1:])
	case "inspect":
		return g.inspect(rest[1:])
	case "advance":
		return g.advance(rest[1:])
	case "doctor":
		return g.doctor(rest[1:])
	case "reset-highwater":
		return g.resetHighWater(rest[1:])
	case "repair-counter":
		return g.repairCounter(rest[1:])
	}
	return g.usageError("unknown command %q", rest[0])
}

// parseArgs parses flags interspersed with positional arguments (flag stops
// at the first positional one) and returns the positional arguments. A "--"
// ends the flags: what follows is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) < len(args) && len(rest) > 0 && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, nil
}

// parseCommand parses the arguments of a command on one lock (inspect,
// advance, reset-highwater, repair-counter): its flags, then the
// positional arguments that usage names, the first a lock name. It
// returns them, or nil and the status of the usage error it reported (or
// of the help it printed).
func (g *globals) parseCommand(fs *flag.FlagSet, args []string, usage string) ([]string, int) {
	want := len(strings.Fields(usage))
	pos, err := parseArgs(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, g.help()
	case err != nil:
		return nil, g.usageError("%s: %v", g.cmd, err)
	case len(pos) != want:
		return nil, g.usageError("%s: want %s, got %d arguments", g.cmd, usage, len(pos))
	}
	if err := checkName("lock name", pos[0]); err != nil {
		return nil, g.usageError("%s: %v", g.cmd, err)
	}
	return pos, exitOK
}

// session connects to Redis for a command on one lock and gives it its
// budget: ctx ends --timeout from now, and done, to defer, cancels it and
// closes the connection by the budget's hard end. It returns a nil
// backend and the status of the failure it reported when it cannot.
func (g *globals) session() (b backend, ctx context.Context, done func(), code int) {
	b, code = g.backend()
	if b == nil {
		return nil, nil, nil, code
	}
	bud := newBudget(g.timeout)
	ctx, cancel := bud.ctx()
	return b, ctx, func() { cancel(); closeBy(b, bud.hard) }, exitOK
}

// budget is a command's time against Redis: its operation (the wait for
// the lock, or an inspect or advance) ends by end, --wait or --timeout
// after it began, and the rest (telling a held lock from an unreachable
// Redis, cleanups before exit) by hard, finishSlack later. So a frozen or
// unreachable Redis cannot keep a command much past the time it was given.
type budget struct{ end, hard time.Time }

func newBudget(d time.Duration) budget {
	now := time.Now()
	return budget{end: now.Add(d), hard: now.Add(d + finishSlack)}
}

// ctx returns a context that ends at end.
func (b budget) ctx() (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), b.end)
}

// closeTimeout bounds the wait for background cleanups before exit.
const closeTimeout = 2 * time.Second

// closeBy closes b, waiting for its background cleanups until at, or
// closeTimeout, whichever comes first.
func closeBy(b backend, at time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), earliest(at, time.Now().Add(closeTimeout)))
	defer cancel()
	b.close(ctx)
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
