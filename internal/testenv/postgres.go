package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DatabaseName is the database StartPostgres creates and DSN points to.
const DatabaseName = "fencelock"

// Postgres is one PostgreSQL server, initialized with initdb in its own
// temporary directory, listening on 127.0.0.1 and a port that stays the same
// across Stop/Kill and Start, with its unix socket in that directory, trust
// auth for user "postgres" and fsync off. Its log is postgres.log in
// [Postgres.Dir]. Methods are safe for concurrent use.
type Postgres struct {
	mu     sync.Mutex
	binDir string
	dir    string // temp root: socket, log, data/
	port   int
	cred   *syscall.Credential // run as this user; nil for the current one
	proc   *proc
	closed bool
}

// StartPostgres runs initdb, starts postgres (in the foreground, as a child
// of this process, so it dies with it) and creates the database "fencelock".
// When running as root, the server runs as the "postgres" OS user.
// The caller must Close it.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	binDir, err := findPGBin()
	if err != nil {
		return nil, err
	}
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	dir, err := makeTempDir("testenv-pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{binDir: binDir, dir: dir, cred: cred}
	if err = p.initdb(); err == nil {
		err = p.startFree(ctx)
	}
	if err == nil {
		err = p.createDatabase(ctx, DatabaseName)
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// findPGBin returns the directory holding initdb and postgres: $PG_BIN, else
// `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin, else PATH.
func findPGBin() (string, error) {
	var dirs []string
	if d := os.Getenv("PG_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versioned, func(i, j int) bool { return pgMajor(versioned[i]) > pgMajor(versioned[j]) })
	dirs = append(dirs, versioned...)
	if path, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(path))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", notInstalled("PostgreSQL initdb/postgres", fmt.Errorf("not in $PG_BIN, pg_config --bindir, /usr/lib/postgresql/*/bin or PATH (looked in %q)", dirs))
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// pgCredential returns the "postgres" OS user when running as root, because
// postgres refuses to run as root; nil otherwise.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("testenv: running as root, postgres must run as the \"postgres\" OS user: %w (create it with `useradd -r postgres`, or apt-get install -y postgresql)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (p *Postgres) dataDir() string { return filepath.Join(p.dir, "data") }
func (p *Postgres) logPath() string { return filepath.Join(p.dir, "postgres.log") }

func (p *Postgres) initdb() error {
	if p.cred != nil {
		if err := os.Chown(p.dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return fmt.Errorf("testenv: chown %s to postgres: %w", p.dir, err)
		}
	}
	cmd := exec.Command(filepath.Join(p.binDir, "initdb"), "-D", p.dataDir(),
		"-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: initdb in %s: %w\n%s", p.dataDir(), err, out)
	}
	return nil
}

// startFree starts the server on a free port (see onFreePort).
func (p *Postgres) startFree(ctx context.Context) error {
	return onFreePort(func(port int) error { p.port = port; return p.Start(ctx) })
}

// Port returns the TCP port, the same across restarts.
func (p *Postgres) Port() int { return p.port }

// Dir returns the temporary directory (data/, postgres.log, unix socket).
func (p *Postgres) Dir() string { return p.dir }

// DSN returns "postgres://postgres@127.0.0.1:PORT/fencelock?sslmode=disable".
func (p *Postgres) DSN() string { return p.dsn(DatabaseName) }

func (p *Postgres) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// Start (re)starts the server on the same port and data directory after Stop
// or Kill, and waits until it accepts connections (at most 15s, or until ctx
// ends). After Kill it first replays the WAL (crash recovery).
func (p *Postgres) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.proc.running() {
		return fmt.Errorf("testenv: postgres on port %d is already running", p.port)
	}
	args := []string{"-D", p.dataDir(), "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	offset := fileSize(p.logPath())
	proc, err := startProc(filepath.Join(p.binDir, "postgres"), args, p.dir, p.logPath(), p.cred)
	if err != nil {
		return err
	}
	p.proc = proc
	if err := waitPostgres(ctx, p.dsn("postgres"), proc); err != nil {
		proc.kill()
		return startError(fmt.Sprintf("postgres on 127.0.0.1:%d", p.port), p.logPath(), offset, err)
	}
	return nil
}

// waitPostgres connects with pgx until it succeeds, the process exits or the
// time is up.
func waitPostgres(ctx context.Context, dsn string, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, dsn)
		ccancel()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last connect: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *Postgres) createDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("testenv: connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("testenv: create database %s: %w", name, err)
	}
	return nil
}

// Stop shuts the server down in fast mode (SIGINT: clients are disconnected,
// a checkpoint is written) and waits; after 30s it is killed.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc.stop(syscall.SIGINT, 30*time.Second)
}

// Kill stops the server in immediate mode (SIGQUIT, like pg_ctl stop -m
// immediate): no checkpoint, so the next Start runs crash recovery. Unlike
// SIGKILL it lets postgres release its shared memory. After 10s the whole
// process group is killed.
func (p *Postgres) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc.stop(syscall.SIGQUIT, 10*time.Second)
}

// Close stops the server in immediate mode if it runs and removes its
// directory. It is idempotent and safe after Stop or Kill.
func (p *Postgres) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.proc.stop(syscall.SIGQUIT, 10*time.Second)
	if p.port != 0 {
		releasePort(p.port)
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}
