// Package report is the output of every bench command: the JSON, the text
// table and the self-contained HTML page of a run, and the progress line
// while it runs. perf and safety fill its types; it owns their rendering.
package report

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// Header is what every report opens with: the run and the machine.
type Header struct {
	Command   string            `json:"command"`
	Timestamp string            `json:"timestamp"`
	Quick     bool              `json:"quick"`
	Elapsed   string            `json:"elapsed"`
	Machine   Machine           `json:"machine"`
	Versions  map[string]string `json:"versions"`
	// Notes say what the run left out that a reader would look for, and
	// why: "valkey-server is not installed: ...".
	Notes []string `json:"notes,omitempty"`
}

// Machine is where the figures come from.
type Machine struct {
	CPUs   int    `json:"cpus"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	Go     string `json:"go"`
	// Redis names the Redis-protocol server and its version: "redis
	// 7.0.15", "valkey 8.0.1" (a run recorded before the name: "7.0.15").
	Redis string `json:"redis_server"`
	// Others are the other servers the run measured some locks on, the
	// same way: perf's -servers after the first.
	Others   []string `json:"other_servers,omitempty"`
	Postgres string   `json:"postgres,omitempty"`
	MySQL    string   `json:"mysql,omitempty"`
	Servers  string   `json:"servers"` // throwaway or given
}

// NewHeader starts the header of a run of `go run ./bench NAME` with the
// flags set in fs (URLs hidden: they may hold credentials).
func NewHeader(name string, fs *flag.FlagSet, quick bool) Header {
	return Header{
		Command:   CommandLine(name, fs),
		Timestamp: time.Now().UTC().Format(time.RFC3339),
		Quick:     quick,
		Machine:   Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version()},
		Versions:  Versions(),
	}
}

// CommandLine is the command that reproduces a run: `go run ./bench NAME`
// and the flags set in fs, with URL values replaced by "…".
func CommandLine(name string, fs *flag.FlagSet) string {
	cmd := []string{"go run ./bench " + name}
	fs.Visit(func(f *flag.Flag) {
		switch {
		case strings.HasSuffix(f.Name, "-url"):
			cmd = append(cmd, "-"+f.Name+"=…")
		case f.Name == "quick":
			cmd = append(cmd, "-quick")
		default:
			cmd = append(cmd, "-"+f.Name+" "+f.Value.String())
		}
	})
	return strings.Join(cmd, " ")
}

// Versions reports the modules measured: fencelock (git describe of the
// work tree when it can be had, since it is built from ../ by a replace)
// and the peers, from the build info.
func Versions() map[string]string {
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

// facts are the header's parts, in order, for a one-line summary; extra
// parts go before "took".
func (h *Header) facts(extra ...string) []string {
	m := h.Machine
	out := []string{h.Timestamp, fmt.Sprintf("%s %s/%s", Plural(m.CPUs, "CPU"), m.GOOS, m.GOARCH), m.Go, serverText(m.Redis)}
	out = append(out, m.Others...)
	if m.MySQL != "" {
		out = append(out, "mysql "+m.MySQL)
	}
	if m.Postgres != "" {
		out = append(out, "postgres "+m.Postgres)
	}
	if m.Servers != "" {
		out = append(out, m.Servers+" servers")
	}
	out = append(out, extra...)
	if h.Elapsed != "" {
		out = append(out, "took "+h.Elapsed)
	}
	return out
}

// serverText is a server as Machine.Redis names it, with "redis" before
// the bare version of a run recorded before the name.
func serverText(v string) string {
	if v == "" || strings.Contains(v, " ") {
		return v
	}
	return "redis " + v
}

// TextLine is the header as the first line of a text table.
func (h *Header) TextLine(extra ...string) string {
	return fmt.Sprintf("%s   (%s)", h.Command, strings.Join(h.facts(extra...), ", "))
}

// Plural is n and the noun, with an "s" unless n is 1: "1 overlap", "2
// overlaps".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// WriteJSON writes v, indented, to path, making its directory.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
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

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
