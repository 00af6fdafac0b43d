package checkrun

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/bench/internal/cli"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/safety"
)

// Usage is the synopsis of `bench check`.
const Usage = "go run ./bench check [-quick] [-seed N] [-clients N] [-duration D] [-ttl D] [-locks KIND,...] [-faults FAULT,...] [-json FILE] [-html FILE] [-redis-url URL[,URL...]] [-database-url URL]"

// options is `bench check`'s flags.
type options struct {
	quick         bool
	seed          int64
	clients       int
	duration      time.Duration
	ttl           time.Duration
	locks         []string
	faults        []check.Fault
	killHolder    bool // the semaphore workload's kill-holder fault (not of the schedule)
	jsonFile      string
	htmlFile      string
	redisURL      string
	dbURL         string
	linearTimeout time.Duration
	plan          check.Plan
	fs            *flag.FlagSet
}

func kindNames() []string {
	var out []string
	for _, k := range safety.CheckKinds() {
		out = append(out, k.Name)
	}
	out = append(out, kindElection)
	for _, k := range semaphoreInfos {
		out = append(out, k.Name)
	}
	return out
}

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{fs: fs}
	fs.BoolVar(&o.quick, "quick", false, "12s per kind, 400ms TTL, a denser fault schedule: every kind in about 2.5 minutes")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the fault schedule (default: random, printed); the same seed replays the same schedule")
	fs.IntVar(&o.clients, "clients", 16, "clients per lock kind")
	fs.DurationVar(&o.duration, "duration", 0, "run time per lock kind (default 60s, or 12s with -quick)")
	fs.DurationVar(&o.ttl, "ttl", 0, "lock TTL (default 1s, or 400ms with -quick)")
	lockList := fs.String("locks", strings.Join(kindNames(), ","), "comma-separated lock kinds to run")
	faultList := fs.String("faults", "all", "comma-separated faults to inject: all, none, or of "+faultNames()+
		"; and "+string(faultKillHolder)+" (the semaphore workload's)")
	fs.StringVar(&o.jsonFile, "json", "", "write every kind's history, schedule and findings as JSON to `FILE`")
	fs.StringVar(&o.htmlFile, "html", "", "write an HTML timeline per kind (fault windows shaded, anomalies marked) to `FILE`")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis for the locks: one URL for the single-node kinds, or five for all (default: throwaway servers; node faults are not applied to given servers)")
	fs.StringVar(&o.dbURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL for the data (default $DATABASE_URL, else a throwaway server)")
	fs.DurationVar(&o.linearTimeout, "linear-timeout", 0, "bound on the linearizability search per register (default 30s, or 10s with -quick)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.locks, err = cli.Pick(*lockList, kindNames()); err != nil {
		return nil, fmt.Errorf("-locks: %w", err)
	}
	var schedFaults []string // kill-holder is the semaphore workload's own
	for _, f := range strings.Split(*faultList, ",") {
		switch f = strings.TrimSpace(f); f {
		case string(faultKillHolder):
			o.killHolder = true
			continue
		case "all":
			o.killHolder = true
		}
		schedFaults = append(schedFaults, f)
	}
	if o.faults, err = check.ParseFaults(strings.Join(schedFaults, ",")); err != nil {
		return nil, fmt.Errorf("-faults: %w", err)
	}
	if o.clients < 1 {
		return nil, fmt.Errorf("-clients %d: at least 1", o.clients)
	}
	if o.seed == 0 {
		o.seed = int64(rand.Uint32()) + 1
	}
	def := func(v *time.Duration, normal, quick time.Duration) {
		if *v == 0 {
			*v = normal
			if o.quick {
				*v = quick
			}
		}
	}
	def(&o.duration, 60*time.Second, 12*time.Second)
	def(&o.ttl, time.Second, 400*time.Millisecond)
	def(&o.linearTimeout, 30*time.Second, 10*time.Second)
	if o.ttl < 100*time.Millisecond {
		return nil, fmt.Errorf("-ttl %v: at least 100ms", o.ttl)
	}
	if o.duration < 10*o.ttl {
		return nil, fmt.Errorf("-duration %v: at least 10 TTLs (%v)", o.duration, 10*o.ttl)
	}
	o.plan = planFor(o)
	return o, nil
}

// planFor is the schedule's shape: windows long enough for a paused
// holder's lease to expire (at least 1.5 TTL), quiet lead and tail; the
// quick plan is denser, so that every fault gets a window in 12 s.
func planFor(o *options) check.Plan {
	p := check.Plan{Seed: o.seed, Duration: o.duration, Faults: o.faults}
	minLen := o.ttl*3/2 + 50*time.Millisecond
	if o.quick {
		p.Lead, p.Tail = o.duration/12, o.duration/10
		p.MinLen, p.MaxLen = minLen, minLen+o.ttl/2
		p.MinGap, p.MaxGap = o.ttl/4, o.ttl/2
	} else {
		p.Lead, p.Tail = o.duration/12, o.duration/10
		p.MinLen, p.MaxLen = minLen, max(minLen, 3*o.ttl)
		p.MinGap, p.MaxGap = o.ttl/2, 2*o.ttl
	}
	return p
}

func faultNames() string {
	var out []string
	for _, f := range check.AllFaults {
		out = append(out, string(f))
	}
	return strings.Join(out, ", ")
}

// commandLine is the command that replays the run's schedule.
func (o *options) commandLine() string {
	cmd := report.CommandLine("check", o.fs)
	set := false
	o.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "seed" })
	if !set {
		cmd += fmt.Sprintf(" -seed %d", o.seed)
	}
	return cmd
}
