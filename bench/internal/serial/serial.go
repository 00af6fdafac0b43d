// Package serial keeps the bench's heavy tests from running at the same
// time. `go test ./bench/...` runs packages in parallel, and the perf
// figures of TestPerfQuick and the staged races of TestSafety both need
// the machine's cores: each takes a lock file first, so across packages
// they run one after the other.
package serial

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Heavy blocks until no other heavy test of any process holds the lock,
// and holds it until tb ends.
func Heavy(tb testing.TB) {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "fencelock-bench-heavy.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() }) // closing releases the lock
}
