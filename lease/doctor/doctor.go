package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/sentinel"
)

// Severity is how much a finding matters.
type Severity int8

const (
	// Info is a fact worth knowing; nothing to fix.
	Info Severity = iota
	// Warn costs availability or performance, or loses a lock or makes
	// tokens go back only in rarer events (an OS crash, a clock step).
	Warn
	// Danger can lose a lock (its key vanishes while the holder still
	// trusts its lease) or make tokens go back, in events a deployment
	// should expect: a restart, a failover, memory pressure.
	Danger
)

var severityNames = [...]string{Info: "info", Warn: "warn", Danger: "danger"}

// String returns "info", "warn" or "danger".
func (s Severity) String() string {
	if s < Info || s > Danger {
		return fmt.Sprintf("severity(%d)", int8(s))
	}
	return severityNames[s]
}

// MarshalText encodes s as its String.
func (s Severity) MarshalText() ([]byte, error) {
	if s < Info || s > Danger {
		return nil, fmt.Errorf("doctor: bad severity %d", int8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText decodes "info", "warn" or "danger".
func (s *Severity) UnmarshalText(b []byte) error {
	i := slices.Index(severityNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("doctor: bad severity %q", b)
	}
	*s = Severity(i)
	return nil
}

// The checks, in the order [Check] reports them.
const (
	CheckVersion     = "version"
	CheckEviction    = "eviction"
	CheckPersistence = "persistence"
	CheckReplication = "replication"
	CheckClock       = "clock"
	CheckLatency     = "latency"
	CheckAuth        = "auth"
	CheckTransport   = "transport"
	CheckCounters    = "counters"
	CheckPubSub      = "cluster-pubsub"
	CheckSlot        = "cluster-slot"
)

var checkOrder = []string{CheckVersion, CheckEviction, CheckPersistence, CheckReplication, CheckClock, CheckLatency,
	CheckAuth, CheckTransport, CheckCounters, CheckPubSub, CheckSlot}

// Finding is one thing a check found. Findings that read the same on
// several servers are reported once, with all of their servers.
type Finding struct {
	Check    string   `json:"check"`    // one of the Check constants
	Severity Severity `json:"severity"` // Info, Warn or Danger
	// Servers are the addresses the finding holds for ("host:port"; the
	// primary of a Sentinel deployment as it reports it); empty for a
	// finding about the deployment as a whole.
	Servers     []string `json:"servers,omitempty"`
	Finding     string   `json:"finding"`               // what is the case
	Consequence string   `json:"consequence,omitempty"` // what it does to locks and tokens
	Fix         string   `json:"fix,omitempty"`         // how to remove it; empty when nothing needs fixing
}

// Worst returns the highest severity among findings, Info when there are
// none.
func Worst(findings []Finding) Severity {
	w := Info
	for _, f := range findings {
		w = max(w, f.Severity)
	}
	return w
}

// ServerError is a check that could not run on one server (unreachable,
// or the context ended).
type ServerError struct {
	Server string
	Err    error
}

func (e *ServerError) Error() string { return "doctor: " + e.Server + ": " + e.Err.Error() }
func (e *ServerError) Unwrap() error { return e.Err }

// Check examines the Redis deployment behind rdb (a standalone server and
// the replicas it lists, a Sentinel-managed primary and its replicas,
// every node of a Redis Cluster, every shard of a Ring) and returns its
// findings, ordered by check (eviction, persistence, replication, clock,
// latency, then the cluster checks) and by severity. opts describe the
// lease clients that use the deployment.
//
// A server that cannot be checked (unreachable, or ctx ended) yields a
// [*ServerError] in the returned error, joined with the others; the
// findings of the other servers are returned with it. A check whose
// command the server refuses with NOPERM (the user's ACL) yields a
// [*RefusedError] in a *ServerError, and the other checks of that server
// still run; CONFIG disabled or renamed (as on some managed services) is a
// Warn finding instead. Check returns by ctx's deadline when rdb was made with
// go-redis's ContextTimeoutEnabled.
func Check(ctx context.Context, rdb redis.UniversalClient, opts ...Option) ([]Finding, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	var (
		mu       sync.Mutex
		findings []Finding
		errs     []error
	)
	add := func(fs ...Finding) {
		mu.Lock()
		findings = append(findings, fs...)
		mu.Unlock()
	}
	perNode := func(ctx context.Context, n *redis.Client) error {
		addr := serverName(ctx, n)
		fs, err := checkNode(ctx, n, addr, cfg)
		add(fs...)
		if err != nil {
			mu.Lock()
			errs = append(errs, &ServerError{Server: addr, Err: err})
			mu.Unlock()
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, perNode)
		if err == nil {
			var fs []Finding
			fs, err = checkCluster(ctx, c, cfg)
			add(fs...)
		}
	case *redis.Ring:
		err = c.ForEachShard(ctx, perNode)
	case *redis.Client:
		_ = perNode(ctx, c) // keeps its error in errs
		if cfg.replicas && len(errs) == 0 {
			var fs []Finding
			fs, err = checkReplicas(ctx, c, cfg)
			add(fs...)
		}
	default:
		err = fmt.Errorf("doctor: unsupported client %T", rdb)
	}
	if err != nil {
		if !strings.HasPrefix(err.Error(), "doctor: ") {
			err = fmt.Errorf("doctor: %w", err)
		}
		errs = append(errs, err)
	}
	return merge(findings), sentinel.Join(errs...)
}

// serverName is n's address. A Sentinel client's is not in its options:
// the server tells the address it was reached at (CLIENT INFO laddr,
// Redis 6.2 and later), else it is "sentinel-primary".
func serverName(ctx context.Context, n *redis.Client) string {
	if a := n.Options().Addr; a != "" && a != "FailoverClient" {
		return a
	}
	if ci, err := n.ClientInfo(ctx).Result(); err == nil && ci.LAddr != "" {
		return ci.LAddr
	}
	return "sentinel-primary"
}

// checkNode runs the per-server checks on n. A refused INFO or CONFIG GET
// is a *RefusedError for the checks that need it; the others still run.
func checkNode(ctx context.Context, n *redis.Client, addr string, cfg *config) ([]Finding, error) {
	var (
		fs      []Finding
		errs    []error
		replica bool // its primary's counters are the ones that count
	)
	info, err := n.Info(ctx).Result()
	switch {
	case isNoPerm(err):
		for _, c := range []string{CheckVersion, CheckEviction, CheckPersistence, CheckReplication} {
			errs = append(errs, refused(c, "INFO", err))
		}
	case err != nil:
		return nil, err
	default:
		s := serverState{info: parseInfo(info)}
		replica = s.info["role"] == "slave"
		s.readConfig(ctx, n)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if isNoPerm(s.confErr) {
			errs = append(errs, refused(CheckPersistence, "CONFIG GET", s.confErr))
		}
		fs = append(fs, versionFindings(s)...)
		fs = append(fs, evictionFindings(s)...)
		fs = append(fs, persistenceFindings(s, cfg)...)
		fs = append(fs, replicationFindings(s, cfg)...)
	}
	t, err := checkTiming(ctx, n, cfg)
	fs = append(fs, t...)
	if err != nil {
		errs = append(errs, err)
	}
	fs = append(fs, authFinding(ctx, n)...)
	fs = append(fs, transportFinding(addr, n.Options()))
	if !replica {
		c, err := counterFindings(ctx, n, cfg)
		fs = append(fs, c...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i := range fs {
		fs[i].Servers = []string{addr}
	}
	return fs, errors.Join(errs...)
}

// merge sorts findings by check and joins those that differ only in
// their servers.
func merge(fs []Finding) []Finding {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if c := slices.Index(checkOrder, a.Check) - slices.Index(checkOrder, b.Check); c != 0 {
			return c
		}
		if c := int(b.Severity) - int(a.Severity); c != 0 {
			return c
		}
		return strings.Compare(strings.Join(a.Servers, ","), strings.Join(b.Servers, ","))
	})
	var out []Finding
	for _, f := range fs {
		if i := slices.IndexFunc(out, func(o Finding) bool {
			return o.Check == f.Check && o.Severity == f.Severity && o.Finding == f.Finding &&
				o.Consequence == f.Consequence && o.Fix == f.Fix
		}); i >= 0 {
			out[i].Servers = append(out[i].Servers, f.Servers...)
			continue
		}
		f.Servers = slices.Clone(f.Servers)
		out = append(out, f)
	}
	return out
}
