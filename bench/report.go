package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the whole run: what the JSON holds and the HTML shows.
type Report struct {
	Command   string            `json:"command"`
	Timestamp string            `json:"timestamp"`
	Quick     bool              `json:"quick"`
	Elapsed   string            `json:"elapsed"`
	Machine   Machine           `json:"machine"`
	Versions  map[string]string `json:"versions"`
	Locks     map[string]string `json:"locks,omitempty"` // each lock's setup, by name
	Results   []Result          `json:"results"`
	Targets   []Target          `json:"targets"`
}

// Machine is where the figures come from.
type Machine struct {
	CPUs     int    `json:"cpus"`
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	Go       string `json:"go"`
	Redis    string `json:"redis_server"`
	Postgres string `json:"postgres,omitempty"`
	Servers  string `json:"servers"` // throwaway or given
}

func newReport(fs *flag.FlagSet, quick bool, e *env) *Report {
	cmd := []string{"go run ./bench perf"}
	fs.Visit(func(f *flag.Flag) {
		if strings.HasSuffix(f.Name, "-url") {
			cmd = append(cmd, "-"+f.Name+"=…") // keep credentials out of reports
			return
		}
		if f.Name == "quick" {
			cmd = append(cmd, "-quick")
			return
		}
		cmd = append(cmd, "-"+f.Name+" "+f.Value.String())
	})
	return &Report{
		Command:   strings.Join(cmd, " "),
		Timestamp: time.Now().UTC().Format(time.RFC3339),
		Quick:     quick,
		Machine: Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
			Go: runtime.Version(), Redis: e.redisVer, Servers: e.where},
		Versions: versions(),
	}
}

// versions reports the modules measured: fencelock (git describe of the
// work tree when it can be had, since it is built from ../ by a replace)
// and the peers, from the build info.
func versions() map[string]string {
	v := map[string]string{"fencelock": "(devel)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/redis/rueidis",
				"github.com/redis/go-redis/v9", "github.com/jackc/pgx/v5":
				v[d.Path] = d.Version
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if dir, err := os.Getwd(); err == nil {
		out, err := exec.CommandContext(ctx, "git", "-C", dir, "describe", "--always", "--dirty").Output()
		if err == nil {
			v["fencelock"] = "git " + strings.TrimSpace(string(out))
		}
	}
	return v
}

// find returns the result of lock in scenario, or nil.
func find(rs []Result, lock, scenario string) *Result {
	for i := range rs {
		if rs[i].Lock == lock && rs[i].Scenario == scenario && !rs[i].Skipped {
			return &rs[i]
		}
	}
	return nil
}

func writeJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(b, '\n'))
}

func writeFile(path string, b []byte) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b, 0o644)
}

// fmtUs formats microseconds: one decimal below 1000, none above.
func fmtUs(p *float64) string {
	switch {
	case p == nil:
		return "—"
	case *p < 1000:
		return fmt.Sprintf("%.1f", *p)
	}
	return fmt.Sprintf("%.0f", *p)
}

func fmtOps(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f", *p)
}

func fmtInt(p *int) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%d", *p)
}

// fmtCPU formats CPU seconds per second.
func fmtCPU(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.3f", *p)
}

func fmtMs(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", *p)
}

func fmtShare(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.3f", *p)
}

// lockRows returns the lock names present in rs, in table order.
func lockRows(rs []Result) []string {
	var out []string
	for _, n := range lockNames {
		for _, r := range rs {
			if r.Lock == n {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// writeTable prints the results, one row per lock, then the pg rows and
// the targets.
func writeTable(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "%s   (%s, %d CPUs, %s/%s, %s, redis %s", rep.Command, rep.Timestamp, m.CPUs, m.GOOS, m.GOARCH, m.Go, m.Redis)
	if m.Postgres != "" {
		fmt.Fprintf(w, ", postgres %s", m.Postgres)
	}
	fmt.Fprintf(w, ", %s servers)\n\n", m.Servers)

	var main []Result // the scenarios of the main table
	for _, r := range rep.Results {
		if r.Scenario != "waiters" {
			main = append(main, r)
		}
	}
	var tw *tabwriter.Writer
	if rows := lockRows(main); len(rows) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "lock\tuncontended p50 µs\tp99 µs\tparallel ops/s\twake p50 µs\tp99 µs\t"+
			"hotkey cs/s\tmin share\tmax share\thotkey64 cs/s\tmin share\tmax share\terrors\t")
		for _, n := range rows {
			u, p, wk := find(rep.Results, n, "uncontended"), find(rep.Results, n, "parallel"), find(rep.Results, n, "wake")
			errs := 0
			for _, r := range rep.Results {
				if r.Lock == n && r.Scenario != "waiters" { // waiters has its own table
					errs += r.Errors
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t", n,
				fmtUs(field(u, func(r *Result) *float64 { return r.P50us })),
				fmtUs(field(u, func(r *Result) *float64 { return r.P99us })),
				fmtOps(field(p, func(r *Result) *float64 { return r.OpsPerSec })),
				fmtUs(field(wk, func(r *Result) *float64 { return r.P50us })),
				fmtUs(field(wk, func(r *Result) *float64 { return r.P99us })))
			for _, hr := range hotkeyRuns {
				h := find(rep.Results, n, hr.scenario)
				fmt.Fprintf(tw, "%s\t%s\t%s\t",
					fmtOps(field(h, func(r *Result) *float64 { return r.OpsPerSec })),
					fmtShare(field(h, func(r *Result) *float64 { return r.MinShare })),
					fmtShare(field(h, func(r *Result) *float64 { return r.MaxShare })))
			}
			fmt.Fprintf(tw, "%d\t\n", errs)
		}
		tw.Flush()
	}

	var ws []Result
	for _, r := range rep.Results {
		if r.Scenario == "waiters" && !r.Skipped {
			ws = append(ws, r)
		}
	}
	if len(ws) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "waiters\twaiting\tkeys\tconns\tpub/sub\tserver conns\tCPU s/s\tacquired\tall acquired ms\terrors\t")
		for _, r := range ws {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t\n", r.Lock, r.Workers, r.Keys,
				fmtInt(r.Conns), fmtInt(r.PubSubConns), fmtInt(r.ServerConns), fmtCPU(r.CPUPerSec), r.Samples, fmtMs(r.AllAcquiredMs), r.Errors)
		}
		tw.Flush()
	}

	var pg []Result
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Scenario, "pg_") {
			pg = append(pg, r)
		}
	}
	if len(pg) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "postgres\tp50 µs\tp99 µs\ttx/s\t")
		for _, r := range pg {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", r.Scenario, fmtUs(r.P50us), fmtUs(r.P99us), fmtOps(r.OpsPerSec))
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nwake, hotkey, waiters: raw and naive have no waiting acquire. hotkey: 8 workers on one key, 1 ms held; fair share 0.125; hotkey64: 64 workers, fair 0.016.")
	if len(ws) > 0 {
		fmt.Fprintln(w, "waiters: conns and pub/sub are the lock's own client's connections (CLIENT LIST, by name) while they wait; CPU s/s is the bench process's CPU time per wall second then; all acquired is from the holders' release to the last waiter's acquire.")
	}
	if rep.Quick {
		fmt.Fprintln(w, "-quick: small samples (wake < 100); a smoke run, not figures to quote.")
	}
	if len(rep.Targets) > 0 {
		fmt.Fprintln(w, "\ntargets:")
		for _, t := range rep.Targets {
			fmt.Fprintf(w, "  %-6s %-48s %s\n", t.verdict(), t.Name, t.Measured)
		}
	}
}

func field(r *Result, f func(*Result) *float64) *float64 {
	if r == nil {
		return nil
	}
	return f(r)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
