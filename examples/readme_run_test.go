package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
)

// TestREADMEPrograms runs every ```go block of README.md that is a whole
// program (a whole file with func main) against throwaway servers, as a
// reader would run it: each server variable the program reads (REDIS_URL,
// DATABASE_URL, MYSQL_DSN) points at a fresh redis-server, PostgreSQL or
// MariaDB started for this test. The program must exit 0, and print every
// line of the ```text block that follows it in the README, if there is one.
// TestREADMECompiles reports blocks that do not build.
func TestREADMEPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and runs the README's programs; skipped with -short")
	}
	path := os.Getenv(readmeEnv)
	if path == "" {
		path = filepath.Join("..", "README.md")
	}
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	var programs []codeBlock
	for _, b := range goBlocks(src) {
		if wholeFile(b.code) && funcMain.MatchString(b.code) {
			programs = append(programs, b)
		}
	}
	if len(programs) == 0 {
		t.Skipf("%s has no whole program", path)
	}

	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir, err := os.MkdirTemp(root, "_readmerun-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })

	// The servers the programs read, started once and shared by them.
	servers := map[string]func() string{
		"REDIS_URL":    func() string { return testenv.NewRedis(t).URL() },
		"DATABASE_URL": func() string { return testenv.NewPostgres(t).DSN() },
		"MYSQL_DSN":    func() string { return testenv.NewMariaDB(t).DSN() },
	}
	started := map[string]string{}
	for _, b := range programs {
		for v, start := range servers {
			if started[v] == "" && strings.Contains(b.code, `"`+v+`"`) {
				started[v] = start()
			}
		}
	}

	for _, b := range programs {
		name := "line" + strconv.Itoa(b.line)
		t.Run(name, func(t *testing.T) {
			pkg := filepath.Join(dir, name)
			require.NoError(t, os.Mkdir(pkg, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "main.go"), []byte(b.code), 0o644))
			bin := filepath.Join(dir, name+".bin")
			build := exec.Command("go", "build", "-o", bin, "./"+filepath.Join(filepath.Base(dir), name))
			build.Dir = root
			out, err := build.CombinedOutput()
			require.NoError(t, err, "%s:%d: go build:\n%s", path, b.line, out)

			env := os.Environ()
			for v, url := range started {
				if strings.Contains(b.code, `"`+v+`"`) {
					env = append(env, v+"="+url)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = env
			out, err = cmd.CombinedOutput()
			require.NoError(t, err, "%s:%d: the program failed:\n%s", path, b.line, out)
			for _, line := range b.output {
				if line = strings.TrimSpace(line); line != "" {
					assert.Contains(t, string(out), line, "%s:%d: output", path, b.line)
				}
			}
			t.Logf("%s:%d: %s", path, b.line, strings.TrimSpace(string(out)))
		})
	}
}
