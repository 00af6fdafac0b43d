package testenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ownerFile, in every server directory, holds the pid of the process that
// made it. A test binary killed by a timeout or Ctrl-C cannot clean up (its
// servers die with it through Pdeathsig), so the next run removes
// directories whose owner is gone.
const ownerFile = "testenv.owner"

var sweepOnce sync.Once

// makeTempDir creates a server directory named prefix* in the temp dir, or
// in /tmp when the temp dir's path is too long for a unix socket inside it.
func makeTempDir(prefix string) (string, error) {
	sweepOnce.Do(sweepStale)
	dir, err := os.MkdirTemp("", prefix)
	if err == nil && len(dir) > 80 { // sockaddr_un allows 107 bytes
		os.RemoveAll(dir)
		dir, err = os.MkdirTemp("/tmp", prefix)
	}
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// sweepStale removes server directories left by dead processes, and the
// SysV shared memory segment of a PostgreSQL killed with its owner.
// Directories of live processes (other test binaries) are left alone.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "testenv-*"))
	if os.TempDir() != "/tmp" {
		more, _ := filepath.Glob("/tmp/testenv-*")
		dirs = append(dirs, more...)
	}
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		removeStaleShm(filepath.Join(dir, "data", "postmaster.pid"))
		os.RemoveAll(dir)
	}
}

// removeStaleShm drops the segment named on line 7 ("key shmid") of a dead
// postmaster's postmaster.pid; only a postmaster removes it on exit.
func removeStaleShm(pidFile string) {
	f, err := os.Open(pidFile)
	if err != nil {
		return
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		if f := strings.Fields(s.Text()); line == 7 && len(f) == 2 {
			if id, err := strconv.Atoi(f[1]); err == nil && id >= 0 {
				const ipcRMID = 0
				syscall.Syscall(syscall.SYS_SHMCTL, uintptr(id), ipcRMID, 0)
			}
			return
		}
	}
}
