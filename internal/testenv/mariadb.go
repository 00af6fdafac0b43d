package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLDSN returns $MYSQL_DSN: the MySQL or MariaDB server that examples,
// bench and MariaDBOrStart use instead of a throwaway server when it is set.
// It is a go-sql-driver/mysql DSN ("user:pass@tcp(host:3306)/db"), not a URL,
// hence the name.
func MySQLDSN() string { return os.Getenv("MYSQL_DSN") }

// MariaDB is one MariaDB server, initialized with mariadb-install-db in its
// own temporary directory, listening on 127.0.0.1 and a port that stays the
// same across Stop/Kill and Start, with its unix socket in that directory, a
// password-less root user for 127.0.0.1 and the database "fencelock". InnoDB
// flushes its log once a second rather than at every commit (a crash, Kill,
// may lose the last second). Its log is mariadb.log in [MariaDB.Dir]. Methods
// are safe for concurrent use.
type MariaDB struct {
	mu       sync.Mutex
	server   string // mariadbd
	install  string // mariadb-install-db
	dir      string // temp root: socket, log, init.sql, data/
	port     int
	cred     *syscall.Credential // run as this user; nil for the current one
	userFlag []string            // --user=root when root and no "mysql" user
	proc     *proc
	closed   bool
}

// StartMariaDB runs mariadb-install-db, starts mariadbd (in the foreground,
// as a child of this process, so it dies with it) and waits until the
// database "fencelock" accepts connections. When running as root, the
// server runs as the "mysql" OS user if there is one, else as root
// (--user=root). The caller must Close it.
func StartMariaDB(ctx context.Context) (*MariaDB, error) {
	server, install, err := findMariaDB()
	if err != nil {
		return nil, err
	}
	dir, err := makeTempDir("testenv-mariadb-")
	if err != nil {
		return nil, err
	}
	m := &MariaDB{server: server, install: install, dir: dir}
	if err = m.credential(); err == nil {
		err = m.installDB(ctx)
	}
	if err == nil {
		err = m.startFree(ctx)
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// findMariaDB returns the paths of mariadbd and mariadb-install-db: in
// $MARIADB_BIN, else in PATH, else in /usr/sbin and /usr/bin.
func findMariaDB() (server, install string, err error) {
	look := func(name string) string {
		if d := os.Getenv("MARIADB_BIN"); d != "" && isExec(filepath.Join(d, name)) {
			return filepath.Join(d, name)
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"} {
			if isExec(filepath.Join(d, name)) {
				return filepath.Join(d, name)
			}
		}
		return ""
	}
	server, install = look("mariadbd"), look("mariadb-install-db")
	if server == "" || install == "" {
		return "", "", fmt.Errorf("%w: MariaDB mariadbd/mariadb-install-db: not in $MARIADB_BIN, PATH, /usr/sbin or /usr/bin; install them with scripts/deps.sh or `apt-get install -y mariadb-server`",
			ErrNotInstalled)
	}
	return server, install, nil
}

// credential decides whom the server runs as. mariadbd refuses to run as
// root unless told --user=root; like PostgreSQL it runs as its own OS user
// when that user exists.
func (m *MariaDB) credential() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		m.userFlag = []string{"--user=root"}
		return nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	m.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if err := os.Chown(m.dir, uid, gid); err != nil {
		return fmt.Errorf("testenv: chown %s to mysql: %w", m.dir, err)
	}
	return nil
}

func (m *MariaDB) dataDir() string  { return filepath.Join(m.dir, "data") }
func (m *MariaDB) logPath() string  { return filepath.Join(m.dir, "mariadb.log") }
func (m *MariaDB) initPath() string { return filepath.Join(m.dir, "init.sql") }

// Socket returns the path of the server's unix socket.
func (m *MariaDB) Socket() string { return filepath.Join(m.dir, "mariadbd.sock") }

// mariadbInit runs at every start, before the server takes connections: a
// root account for TCP from 127.0.0.1 (install-db's root is for the socket)
// and the database.
const mariadbInit = `CREATE DATABASE IF NOT EXISTS ` + DatabaseName + `;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
`

// serverFlags are shared by install-db (which passes them on to the
// bootstrap mariadbd) and the server.
func (m *MariaDB) serverFlags() []string {
	return append([]string{
		"--datadir=" + m.dataDir(),
		"--skip-name-resolve",
		"--innodb-log-file-size=16M",
		"--innodb-buffer-pool-size=64M",
		"--innodb-flush-log-at-trx-commit=2",
		"--skip-log-bin",
	}, m.userFlag...)
}

func (m *MariaDB) installDB(ctx context.Context) error {
	if err := os.WriteFile(m.initPath(), []byte(mariadbInit), 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	// --no-defaults must come first.
	args := append([]string{"--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db"}, m.serverFlags()...)
	cmd := exec.CommandContext(ctx, m.install, args...)
	cmd.Dir = m.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: m.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: mariadb-install-db in %s: %w\n%s", m.dataDir(), err, out)
	}
	return nil
}

// startFree starts the server on a free port (see onFreePort).
func (m *MariaDB) startFree(ctx context.Context) error {
	return onFreePort(func(port int) error { m.port = port; return m.Start(ctx) })
}

// Port returns the TCP port, the same across restarts.
func (m *MariaDB) Port() int { return m.port }

// Dir returns the temporary directory (data/, mariadb.log, unix socket).
func (m *MariaDB) Dir() string { return m.dir }

// DSN returns the go-sql-driver/mysql DSN of the database "fencelock":
// "root@tcp(127.0.0.1:PORT)/fencelock". Append driver parameters after a
// "?" as needed.
func (m *MariaDB) DSN() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", m.port, DatabaseName)
}

// Start (re)starts the server on the same port and data directory after Stop
// or Kill, and waits until it accepts connections (at most 15s, or until ctx
// ends). After Kill, InnoDB first recovers from its redo log.
func (m *MariaDB) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.proc.running() {
		return fmt.Errorf("testenv: mariadbd on port %d is already running", m.port)
	}
	args := append([]string{"--no-defaults"}, m.serverFlags()...)
	args = append(args,
		"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1",
		"--socket="+m.Socket(), "--pid-file="+filepath.Join(m.dir, "mariadbd.pid"),
		"--init-file="+m.initPath(), "--max-connections=200")
	offset := fileSize(m.logPath())
	proc, err := startProc(m.server, args, m.dir, m.logPath(), m.cred)
	if err != nil {
		return err
	}
	m.proc = proc
	if err := waitMariaDB(ctx, m.DSN(), proc); err != nil {
		proc.kill()
		return startError(fmt.Sprintf("mariadbd on 127.0.0.1:%d", m.port), m.logPath(), offset, err)
	}
	return nil
}

// waitMariaDB pings the database until it answers, the process exits or the
// time is up.
func waitMariaDB(ctx context.Context, dsn string, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.Timeout = 2 * time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("mariadbd exited: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last ping: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts the server down cleanly (SIGTERM) and waits; after 30s it is
// killed.
func (m *MariaDB) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc.stop(syscall.SIGTERM, 30*time.Second)
}

// Kill kills the server (SIGKILL): the next Start runs InnoDB crash
// recovery.
func (m *MariaDB) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proc.kill()
	return nil
}

// Close kills the server if it runs and removes its directory. It is
// idempotent and safe after Stop or Kill.
func (m *MariaDB) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.proc.kill()
	if m.port != 0 {
		releasePort(m.port)
	}
	return os.RemoveAll(m.dir)
}

// MariaDBOrStart returns $MYSQL_DSN when it is set, else the DSN of a
// throwaway MariaDB it starts (database "fencelock"). The returned close
// func stops what was started (a no-op for MYSQL_DSN); it is never nil when
// err is nil.
func MariaDBOrStart(ctx context.Context) (dsn string, closeFn func(), err error) {
	if d := MySQLDSN(); d != "" {
		return d, func() {}, nil
	}
	m, err := StartMariaDB(ctx)
	if err != nil {
		return "", nil, err
	}
	return m.DSN(), func() { m.Close() }, nil
}

// NewMariaDB starts a throwaway MariaDB with the database "fencelock",
// closed when the test ends.
func NewMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	ctx, cancel := startCtx(t)
	defer cancel()
	m, err := StartMariaDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
