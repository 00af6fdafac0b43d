// Package examples_test runs every example program as a user would, with
// `go run`, against throwaway servers, and checks the story it tells.
package examples_test

import (
	"context"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every example with go run; skipped with -short")
	}
	cases := map[string][]string{
		"basic":     {"client 2 got it", "can now refuse client 1's writes"},
		"gcpause":   {`the file now says "written by client 1 (stale)"`, "rejected: verifier: stale token", `with the verifier    the file says "written by client 2"`},
		"ledger":    {"the invariant holds", "stale writes rejected"},
		"httpstore": {"409 Conflict", "400 Bad Request", "only the current holder's write landed"},
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "run", "./"+name)
			cmd.Env = append(cmd.Environ(), "REDIS_URL=", "DATABASE_URL=")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, w := range want {
				assert.Contains(t, string(out), w)
			}
			if m := tokenOrder.FindStringSubmatch(string(out)); name == "basic" && assert.NotNil(t, m, "%s", out) {
				second, _ := strconv.ParseUint(m[1], 10, 64)
				first, _ := strconv.ParseUint(m[2], 10, 64)
				assert.Greater(t, second, first, "the waiter's token is newer")
			}
		})
	}
}

// TestMainFilesReadLikeUserCode keeps every example's main.go copyable into
// another module: it imports no internal package (the throwaway servers
// are started by dev.go, through examples/internal/devserver).
func TestMainFilesReadLikeUserCode(t *testing.T) {
	mains, err := filepath.Glob("*/main.go")
	require.NoError(t, err)
	require.NotEmpty(t, mains)
	for _, path := range mains {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			assert.False(t, strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal"),
				"%s imports %s: a user could not copy it", path, p)
		}
	}
}

// tokenOrder matches the basic example's "token SECOND > FIRST".
var tokenOrder = regexp.MustCompile(`token (\d+) > (\d+)`)
