//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// TestRunBudgetFrozenClaim: Redis answers the acquire but freezes before
// the --once-per claim (the fault proxy holds every byte from the claim's
// on). The claim, the release and the cleanups share the budget of taking
// the lock: run exits 1 within --wait (or --timeout) + finishSlack, and the
// command does not run. Before, the claim got a fresh --timeout, the
// release 5s more and the close 2s: 6s for --timeout 1s, 12s for --wait 2s.
func TestRunBudgetFrozenClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what  string
		flags []string
		bound time.Duration
	}{
		{"--timeout 1s", []string{"--timeout", "1s", "run"}, time.Second},
		{"--wait 2s", []string{"run", "--wait", "2s"}, 2 * time.Second},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			r := testenv.NewRedis(t)
			p := faults.NewProxy(t, r.Addr())
			name := lockName(t)
			p.FreezeOn([]byte("fencelock:once:{" + name + "}"))
			dir := t.TempDir()
			args := append([]string{"--redis", "redis://" + p.Addr() + "/0"}, tc.flags...)
			args = append(args, "--ttl", "10s", "--once-per", "1h", name, "--", "touch", "ran")
			begin := time.Now()
			res := fl(t, dir, args...)
			took := time.Since(begin)
			t.Logf("took %v", took.Round(time.Millisecond))
			assert.Equal(t, exitFailure, res.code)
			assert.NoFileExists(t, filepath.Join(dir, "ran"), "the command must not run without its claim")
			assert.LessOrEqual(t, took, tc.bound+finishSlack+slack)
		})
	}
}

// TestRunBudgetFrozenAtEnd: Redis freezes (SIGSTOP) while the command
// runs, and the command then exits. What follows the command (recording the
// period with --once-per, the release, the cleanups) shares releaseTimeout
// and finishSlack: run exits within them, with 1 when the period could not
// be recorded, else with the command's status (the release's failure only
// means the lock expires after its ttl). Before, completion and release
// each took 5s and the close 2s more: about 12s.
func TestRunBudgetFrozenAtEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what  string
		flags []string
		exit  string
		want  int
	}{
		{"completion", []string{"--once-per", "1h"}, "0", exitFailure},
		{"release", nil, "7", 7},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			r := testenv.NewRedis(t)
			t.Cleanup(func() { r.Resume() })
			dir := t.TempDir()
			args := append([]string{"--redis", r.URL(), "run", "--ttl", "10s"}, tc.flags...)
			p := start(t, dir, append(args, lockName(t), "--", "sh", "-c",
				`echo > ready; while [ ! -f frozen ]; do sleep 0.02; done; exit `+tc.exit)...)
			waitFile(t, filepath.Join(dir, "ready"))
			if err := r.Pause(); err != nil {
				t.Fatal(err)
			}
			begin := time.Now()
			if err := os.WriteFile(filepath.Join(dir, "frozen"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			res := p.wait(t)
			took := time.Since(begin)
			t.Logf("took %v after the freeze", took.Round(time.Millisecond))
			assert.Equal(t, tc.want, res.code)
			assert.LessOrEqual(t, took, releaseTimeout+finishSlack+slack)
		})
	}
}
