package checkrun

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary serve as the waiter process and the
// election's leader process, as the bench binary does (see RunWaiter,
// RunLeader).
func TestMain(m *testing.M) {
	if spec := os.Getenv(WaiterEnv); spec != "" {
		if err := RunWaiter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench check waiter:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv(LeaderEnv); spec != "" {
		if err := RunLeader(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench check leader:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
