//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/doctor"
)

// doctor's own exit statuses: exitDanger when a finding can lose a lock or
// make tokens go back; exitUnchecked when no finding is danger but a server
// could not be checked, so that a script does not take "no finding" from an
// unreachable server for a healthy one.
const (
	exitDanger    = 4
	exitUnchecked = 5
)

// doctorTimeout bounds the whole doctor run.
const doctorTimeout = 30 * time.Second

const doctorUsage = `usage:
  fencelock [global flags] doctor [--json] [--ttl D] [--drift F] [--replica-ack N]
                                  [--clock-floor] [--name NAME] [--pings N] [--replicas=false]

Checks the Redis deployment (every URL; every node of a cluster; the replicas a primary
lists) for what loses locks or makes tokens go back: the server's version, eviction,
persistence, replication, clock skew, latency, a default user without a password,
plaintext to another host, poisoned counters (more than 24h above the server's clock;
see repair-counter), and on a Redis Cluster sharded pub/sub and key slots. The flags describe the leases that
use it, so the findings fit them:
  --ttl D            the leases' ttl (default 30s); clock skew and round trips are held
                     against its drift allowance (ttl*drift + 2ms)
  --drift F          the leases' drift factor (default 0.01)
  --replica-ack N    the leases use WithReplicaAck(N, ...) (default 0)
  --clock-floor      the leases use WithClockFloor(true)
  --name NAME        lock name for the cluster slot check (default "doctor")
  --pings N          PINGs per server for the latency check (default 10)
  --replicas=false   do not check the replicas a primary lists (INFO replication)
  --json             print JSON

Exit status: 0 every server checked, no danger finding; 4 a danger finding (a lock can
vanish or tokens go back); 5 no danger finding, but a server could not be checked, or
refused a check (NOPERM: stderr names the check and the permission); 2 usage error.
`

// doctorReport is what doctor --json prints.
type doctorReport struct {
	// Worst is the worst finding's severity; null when nothing was checked.
	Worst    *doctor.Severity `json:"worst"`
	Findings []doctor.Finding `json:"findings"`
	// Complete is false when a server could not be checked (Errors says why).
	Complete bool     `json:"complete"`
	Errors   []string `json:"errors,omitempty"`
	// refused: a server refused a check (NOPERM), rather than not answering.
	refused bool
}

// doctor is the doctor command.
func (g *globals) doctor(args []string) int {
	fs := g.flagSet("doctor")
	asJSON := fs.Bool("json", false, "print JSON")
	ttl := fs.Duration("ttl", defaultTTL, "lease ttl")
	drift := fs.Float64("drift", lease.DefaultDriftFactor, "drift factor")
	replicaAck := fs.Int("replica-ack", 0, "WithReplicaAck replicas")
	clockFloor := fs.Bool("clock-floor", false, "WithClockFloor")
	name := fs.String("name", "doctor", "sample lock name")
	pings := fs.Int("pings", 10, "PINGs per server")
	replicas := fs.Bool("replicas", true, "check the replicas a primary lists")
	pos, err := parseArgs(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(g.stdout, doctorUsage)
		return exitOK
	case err != nil:
		return g.doctorUsageError("%v", err)
	case len(pos) != 0:
		return g.doctorUsageError("want no arguments, got %q", pos)
	}
	for _, err := range []error{checkName("--name", *name), checkDuration("--ttl", *ttl, maxTTL), checkPrintable("--prefix", g.prefix)} {
		if err != nil {
			return g.doctorUsageError("%v", err)
		}
	}
	opts := []doctor.Option{doctor.WithTTL(*ttl), doctor.WithDriftFactor(*drift), doctor.WithReplicaAck(*replicaAck),
		doctor.WithClockFloor(*clockFloor), doctor.WithPrefix(g.prefix), doctor.WithSampleName(*name), doctor.WithPings(*pings),
		doctor.WithReplicas(*replicas)}
	rdbs, code := g.doctorClients()
	if rdbs == nil {
		return code
	}
	defer func() {
		for _, r := range rdbs {
			r.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), doctorTimeout)
	defer cancel()
	rep := doctorReport{Findings: []doctor.Finding{}}
	for _, rdb := range rdbs {
		found, err := doctor.Check(ctx, rdb, opts...)
		if errors.Is(err, doctor.ErrInvalid) { // options are checked before any I/O
			return g.doctorUsageError("%s", strings.TrimPrefix(err.Error(), "doctor: "))
		}
		rep.Findings = append(rep.Findings, found...)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			rep.refused = rep.refused || errors.Is(err, doctor.ErrRefused)
		}
	}
	// Every server checked yields findings (each check reports, info at
	// least): none at all, with errors, means nothing could be checked.
	if len(rep.Findings) > 0 {
		w := doctor.Worst(rep.Findings)
		rep.Worst = &w
	}
	rep.Complete = len(rep.Errors) == 0
	if *asJSON {
		printJSON(g.stdout, rep)
	} else {
		printFindings(g.stdout, rep)
	}
	for _, e := range rep.Errors {
		g.fail(exitFailure, "%s", strings.ReplaceAll(e, "\n", "; ")) // each starts "doctor: "
	}
	switch {
	case rep.Worst != nil && *rep.Worst == doctor.Danger:
		return exitDanger
	case !rep.Complete:
		return exitUnchecked
	}
	return exitOK
}

func (g *globals) doctorUsageError(format string, args ...any) int {
	fmt.Fprintf(g.stderr, "fencelock: doctor: "+format+"\n\n", args...)
	fmt.Fprint(g.stderr, doctorUsage)
	return exitUsage
}

// doctorClients returns a client per deployment named by --redis or
// REDIS_URL: one, or a Redlock's independent masters.
func (g *globals) doctorClients() ([]redis.UniversalClient, int) {
	urls, err := g.redisURLs()
	if err != nil {
		return nil, g.usageError("%v", err)
	}
	tc, err := g.tls.config()
	if err != nil {
		return nil, g.usageError("%v", err)
	}
	var rdbs []redis.UniversalClient
	for _, u := range urls {
		rdb, err := newRedis(u, len(urls) > 1, tc)
		if err != nil {
			for _, r := range rdbs {
				r.Close()
			}
			return nil, g.usageError("%v", err)
		}
		rdbs = append(rdbs, rdb)
	}
	return rdbs, exitOK
}

// printFindings prints the findings for a reader, then a count by
// severity, and says what could not be checked.
func printFindings(w io.Writer, rep doctorReport) {
	counts := map[doctor.Severity]int{}
	for _, f := range rep.Findings {
		counts[f.Severity]++
		where := strings.Join(f.Servers, " ")
		if where == "" {
			where = "deployment"
		}
		fmt.Fprintf(w, "%-6s  %s  %s\n", strings.ToUpper(f.Severity.String()), f.Check, where)
		wrap(w, "", f.Finding)
		if f.Consequence != "" {
			wrap(w, "consequence: ", f.Consequence)
		}
		if f.Fix != "" {
			wrap(w, "fix: ", f.Fix)
		}
		fmt.Fprintln(w)
	}
	if rep.Worst == nil {
		if rep.refused {
			fmt.Fprintln(w, "NOT CHECKED: the server refused the checks (why: on stderr); the deployment's health is unknown")
			return
		}
		fmt.Fprintln(w, "NOT CHECKED: no server answered (why: on stderr); the deployment's health is unknown")
		return
	}
	fmt.Fprintf(w, "%d danger, %d warn, %d info\n", counts[doctor.Danger], counts[doctor.Warn], counts[doctor.Info])
	switch {
	case !rep.Complete && rep.refused:
		fmt.Fprintln(w, "INCOMPLETE: a server refused a check (why, and the permission it needs: on stderr); its findings are missing")
	case !rep.Complete:
		fmt.Fprintln(w, "INCOMPLETE: a server could not be checked (why: on stderr); its findings are missing")
	}
}

// wrap prints label and text indented, wrapped at about 90 columns.
func wrap(w io.Writer, label, text string) {
	const indent, width = "        ", 90
	line := indent + label
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > width && strings.TrimSpace(line) != "" {
			fmt.Fprintln(w, line)
			line = indent + "  "
		}
		if !strings.HasSuffix(line, " ") {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}
