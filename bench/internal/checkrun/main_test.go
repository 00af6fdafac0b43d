package checkrun

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary serve as the waiter process, as the bench
// binary does (see RunWaiter).
func TestMain(m *testing.M) {
	if spec := os.Getenv(WaiterEnv); spec != "" {
		if err := RunWaiter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench check waiter:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
