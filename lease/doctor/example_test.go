package doctor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease/doctor"
)

// Check a deployment at startup, for leases of 10s that wait for one
// replica, and refuse to run on one that can lose locks.
func ExampleCheck() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	findings, err := doctor.Check(ctx, rdb, doctor.WithTTL(10*time.Second), doctor.WithReplicaAck(1))
	if err != nil {
		fmt.Println("some servers were not checked:", err)
	}
	for _, f := range findings {
		if f.Severity >= doctor.Warn {
			fmt.Printf("%s %s %v: %s\n  %s\n  fix: %s\n", f.Severity, f.Check, f.Servers, f.Finding, f.Consequence, f.Fix)
		}
	}
	if doctor.Worst(findings) == doctor.Danger {
		fmt.Println("refusing to start: this Redis can lose locks")
	}
}
