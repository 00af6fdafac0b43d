package checkrun

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary serve as the waiter process, the
// election's leader process and the semaphore's writer process, as the
// bench binary does (see RunWaiter, RunLeader, RunSemWriter).
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
	if spec := os.Getenv(SemWriterEnv); spec != "" {
		if err := RunSemWriter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench check semaphore writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
