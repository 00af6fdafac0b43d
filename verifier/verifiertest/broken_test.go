//go:build unix

package verifiertest_test

// The kit must be able to fail: each test here runs the kit's Reset test,
// in a child process, on the file store with Reset broken, and expects it
// to fail.

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// brokenEnv names the breakage a child process runs.
const brokenEnv = "VERIFIERTEST_BROKEN"

// TestKitCatchesBrokenReset runs each broken Reset in a child process and
// expects the kit to fail it: one that changes nothing, and one that only
// raises the high-water (so it cannot lower a poisoned one).
func TestKitCatchesBrokenReset(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("in a child process")
	}
	for _, name := range []string{"noop", "raise"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenReset$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the kit passed a Reset broken as %s (err %v):\n%s", name, err, out)
			assert.Contains(t, string(out), "--- FAIL: TestBrokenReset", "the kit test failed, not the process:\n%s", out)
			assert.NotContains(t, string(out), "panic: ", "the kit reported a failure, not a crash:\n%s", out)
		})
	}
}

// TestBrokenReset runs, in a child process, the kit's Reset test on the
// file store broken as brokenEnv says.
func TestBrokenReset(t *testing.T) {
	b := os.Getenv(brokenEnv)
	if b == "" {
		t.Skip("run by TestKitCatchesBrokenReset")
	}
	s := fileStore{dir: t.TempDir(), broken: b}
	verifiertest.Reset(t, fileHarness(s))
}
