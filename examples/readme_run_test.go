package examples_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/migrations"
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
	path, programs := readmePrograms(t)
	// The servers the programs read, started once and shared by them.
	env := map[string]string{}
	for _, b := range programs {
		for v, url := range startServers(t, b, env) {
			env[v] = url
		}
	}
	for _, b := range programs {
		t.Run("line"+strconv.Itoa(b.line), func(t *testing.T) {
			bin := buildProgram(t, path, b)
			out, err := runProgram(t, bin, b, env)
			require.NoError(t, err, "%s:%d: the program failed:\n%s", path, b.line, out)
			for _, line := range b.output {
				if line = strings.TrimSpace(line); line != "" {
					assert.Contains(t, out, line, "%s:%d: output", path, b.line)
				}
			}
			t.Logf("%s:%d: %s", path, b.line, strings.TrimSpace(out))
		})
	}
}

// TestREADMEProgramsAtOnce starts two copies of every README program at
// the same moment on a fresh database, as two hosts of one service starting
// together would: both set up the schema at once, and both must succeed.
// Under the lock they take turns: one prints the README's output, the
// other an output of its own (it saw the first one's write). The setup
// race is short, so this is done atOnceRounds times, each on a database
// of its own.
func TestREADMEProgramsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and runs the README's programs; skipped with -short")
	}
	path, programs := readmePrograms(t)
	for _, b := range programs {
		t.Run("line"+strconv.Itoa(b.line), func(t *testing.T) {
			bin := buildProgram(t, path, b)
			servers := startServers(t, b, nil)
			for round := range atOnceRounds {
				env := map[string]string{}
				for v, url := range servers {
					env[v] = freshDatabase(t, v, url, round)
				}
				outs := make([]string, 2)
				errs := make([]error, 2)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range outs {
					wg.Go(func() {
						<-start
						outs[i], errs[i] = runProgram(t, bin, b, env)
					})
				}
				close(start)
				wg.Wait()
				for i := range outs {
					require.NoError(t, errs[i], "%s:%d: round %d, copy %d failed:\n%s", path, b.line, round, i+1, outs[i])
				}
				t.Logf("%s:%d: round %d: %q, %q", path, b.line, round, strings.TrimSpace(outs[0]), strings.TrimSpace(outs[1]))
				_, pg := env["DATABASE_URL"]
				_, my := env["MYSQL_DSN"]
				if pg || my { // a program whose storage is in-process has nothing to share
					assert.NotEqual(t, outs[0], outs[1], "%s:%d: each copy wrote once, the second after the first", path, b.line)
				}
				for _, line := range b.output {
					if line = strings.TrimSpace(line); line != "" {
						assert.True(t, strings.Contains(outs[0], line) || strings.Contains(outs[1], line),
							"%s:%d: neither copy printed %q", path, b.line, line)
					}
				}
			}
		})
	}
}

// atOnceRounds is how many times TestREADMEProgramsAtOnce starts two
// copies. The README before the fix (CREATE TABLE IF NOT EXISTS alone)
// failed in its second round on PostgreSQL: duplicate key value violates
// unique constraint "pg_type_typname_nsp_index".
const atOnceRounds = 8

// freshDatabase returns url (the value of server variable v) pointed at a
// new database of the same server; other servers' URLs unchanged. The new
// database has fencelock's migrations applied already, as where another
// service, or an earlier version of this one, ran them: then the copies'
// migrations.Apply calls pass in a moment, and the program's own schema
// set-up starts at the same time in both.
func freshDatabase(t *testing.T, v, url string, round int) string {
	t.Helper()
	name := fmt.Sprintf("atonce_%d", round)
	ctx := t.Context()
	switch v {
	case "DATABASE_URL":
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
		require.NoError(t, err)
		cfg, err := pgx.ParseConfig(url)
		require.NoError(t, err)
		url = strings.Replace(url, "/"+cfg.Database+"?", "/"+name+"?", 1)
		fresh, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer fresh.Close(context.WithoutCancel(ctx))
		_, err = migrations.Apply(ctx, fresh)
		require.NoError(t, err)
		return url
	case "MYSQL_DSN":
		db, err := sql.Open("mysql", url)
		require.NoError(t, err)
		defer db.Close()
		_, err = db.ExecContext(ctx, "CREATE DATABASE "+name)
		require.NoError(t, err)
		cfg, err := mysql.ParseDSN(url)
		require.NoError(t, err)
		cfg.DBName = name
		fresh, err := sql.Open("mysql", cfg.FormatDSN())
		require.NoError(t, err)
		defer fresh.Close()
		_, err = migrations.ApplySQL(ctx, fresh, migrations.MySQL)
		require.NoError(t, err)
		return cfg.FormatDSN()
	}
	return url
}

// readmePrograms returns the README's path and its whole programs.
func readmePrograms(t *testing.T) (string, []codeBlock) {
	t.Helper()
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
	return path, programs
}

// servers start the servers a program may read, by variable. MYSQL_DSN
// carries a parameter, as users' DSNs do: a program must not assume it has
// none.
var servers = map[string]func(t *testing.T) string{
	"REDIS_URL":    func(t *testing.T) string { return testenv.NewRedis(t).URL() },
	"DATABASE_URL": func(t *testing.T) string { return testenv.NewPostgres(t).DSN() },
	"MYSQL_DSN":    func(t *testing.T) string { return testenv.NewMariaDB(t).DSN() + "?parseTime=true" },
}

// startServers starts the servers that b reads and that have is missing,
// and returns their variables.
func startServers(t *testing.T, b codeBlock, have map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for v, start := range servers {
		if have[v] == "" && strings.Contains(b.code, `"`+v+`"`) {
			env[v] = start(t)
		}
	}
	return env
}

// buildProgram builds b inside this module (so its imports resolve to this
// code and go.mod's versions) and returns the binary.
func buildProgram(t *testing.T, path string, b codeBlock) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir, err := os.MkdirTemp(root, "_readmerun-") // the underscore keeps it out of ./...
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(b.code), 0o644))
	bin := filepath.Join(dir, "program")
	build := exec.Command("go", "build", "-o", bin, "./"+filepath.Base(dir))
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s:%d: go build:\n%s", path, b.line, out)
	return bin
}

// runProgram runs bin with the server variables that b reads and returns
// its combined output.
func runProgram(t *testing.T, bin string, b codeBlock, servers map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = os.Environ()
	for v, url := range servers {
		if strings.Contains(b.code, `"`+v+`"`) {
			cmd.Env = append(cmd.Env, v+"="+url)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
