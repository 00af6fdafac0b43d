package perf

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/bench/internal/servers"
	"github.com/fencelock/fencelock/internal/testenv"
)

// onEveryServer are the locks that also run on the other servers of
// -servers: fencelock's lease, and raw, the floor its ×raw is taken
// against on the same server.
var onEveryServer = []string{"raw", "lease"}

// serversUsage is the -servers flag's doc.
const serversUsage = "comma-separated kinds of throwaway server (redis, valkey): every lock runs on the first, " +
	"raw and lease also on the others, interleaved with the rest, as raw@valkey, lease@valkey " +
	"(default: redis,valkey when valkey-server is installed, else redis; with -redis-url, redis)"

// pickServers parses -servers: the kinds in the order given, the first the
// one every lock runs on. An empty list is the default (see serversUsage);
// note then says what the default left out, for the report.
func pickServers(list string, given bool) (kinds []string, note string, err error) {
	if strings.TrimSpace(list) == "" {
		kinds = []string{servers.Kinds[0]}
		switch {
		case given:
		case servers.Installed("valkey"):
			kinds = append(kinds, "valkey")
		default:
			note = "valkey-server is not installed: the lease ran on redis only (scripts/deps.sh --valkey installs it)"
		}
		return kinds, note, nil
	}
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
		case !slices.Contains(servers.Kinds, k):
			return nil, "", fmt.Errorf("unknown %q (known: %s)", k, strings.Join(servers.Kinds, ","))
		case slices.Contains(kinds, k):
			return nil, "", fmt.Errorf("%q twice", k)
		default:
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil, "", fmt.Errorf("empty list")
	}
	return kinds, "", nil
}

// startOthers starts a throwaway server of each kind of others and builds
// on it the locks of ls that run on every server, named
// locks.OnServer(name, kind). It returns ls with them in, each after the
// same lock on the first server, and what each server says it is
// ("valkey 8.0.1"). The servers close with e.
func (e *env) startOthers(ctx context.Context, others []string, ls []*locks.Lock) ([]*locks.Lock, []string, error) {
	if !slices.ContainsFunc(ls, func(l *locks.Lock) bool { return slices.Contains(onEveryServer, l.Name) }) {
		return ls, nil, nil // nothing would run on them
	}
	var on []locks.Clients
	var names []string
	for _, kind := range others {
		r, err := testenv.StartRedis(ctx, testenv.RedisOptions{Server: servers.Binary(kind)})
		if err != nil {
			return ls, nil, fmt.Errorf("starting %s: %w (or leave it out of -servers)", servers.Binary(kind), err)
		}
		opt := clientOptions(r.Options())
		c := redis.NewClient(opt)
		e.closers = append(e.closers, func() { c.Close(); r.Close() })
		srv, err := servers.Identify(ctx, c)
		if err != nil {
			return ls, nil, err
		}
		name := srv.String()
		if e.where != "throwaway" {
			name += " (throwaway)" // beside given servers
		}
		on, names = append(on, locks.Clients{Single: c, SingleOpt: *opt}), append(names, name)
	}
	var out, made []*locks.Lock
	for _, l := range ls {
		out = append(out, l)
		if !slices.Contains(onEveryServer, l.Name) {
			continue
		}
		for i, kind := range others {
			t, err := locks.New(l.Name, on[i], locks.Config{})
			if err != nil {
				for _, m := range made {
					m.Close()
				}
				return ls, nil, err
			}
			t.Name, t.Note = locks.OnServer(l.Name, kind), "on "+names[i]+": "+t.Note
			out, made = append(out, t), append(made, t)
		}
	}
	return out, names, nil
}

// pairOnServer re-pairs the rows of locks on other servers in rs: ×raw
// against raw on the same server, and no ×best peer (the peers ran on the
// first server only).
func pairOnServer(rs []report.Result) {
	for i := range rs {
		r := &rs[i]
		if _, kind := locks.SplitServer(r.Lock); kind != "" && !r.Skipped {
			r.VsRaw = report.PairedRatio(r, report.Find(rs, locks.OnServer("raw", kind), r.Scenario))
			r.VsBest, r.BestPeer = nil, ""
		}
	}
}
