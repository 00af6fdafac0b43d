//go:build unix

package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/lease"
)

// TestDefaultsStated: the help texts and the package doc state the flag
// defaults and the SIGKILL margin (killMargin) the command uses. Each pattern's group captures a stated value,
// and each pattern must match.
func TestDefaultsStated(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(regexp.MustCompile(`(?m)^//`).ReplaceAllString(string(b), " ")), " ")
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	ops, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"doc.go": doc, "help": flat(usageText), "doctor help": flat(doctorUsage), "operating.md": flat(string(ops))}
	for _, c := range []struct {
		want, where, re string
	}{
		{defaultTTL.String(), "doc.go", `\(ttl --ttl, default (\S+)\)`},
		{defaultTTL.String(), "doc.go", `the default --ttl (\S+) and`},
		{defaultTTL.String(), "doc.go", `--ttl \(default (\S+)\) and --drift`},
		{defaultGrace.String(), "doc.go", `and --grace (\S+) it is not`},
		{defaultTimeout.String(), "doc.go", `within --timeout \(default (\S+)\)`},
		{defaultPrefix, "doc.go", `keys and channel \(default "([^"]+)"\)`},
		{minTTL.String(), "doc.go", `the shortest --ttl is (\S+):`},
		{minTTL.String(), "help", `--ttl D lease ttl \(default \S+, at least (\S+),`},
		{maxTTL.String(), "help", `--ttl D lease ttl \(default \S+, at least \S+, at most (\S+)\)`},
		{maxTTL.String(), "help", `--grace D SIGTERM to SIGKILL delay \(default \S+, at most (\S+)\)`},
		{maxTTL.String(), "help", `slow or unreachable Redis \(default \S+, at most (\S+)\)`},
		{maxWait.String(), "help", `within --timeout; at most (\S+)\)`},
		{maxPeriod.String(), "help", `one Redis deployment only; at most (\S+) \(ten years\)`},
		{maxTTL.String(), "doc.go", `the longest is (\S+):`},
		{maxTTL.String(), "doc.go", `--ttl, --grace and --timeout (\S+),`},
		{maxWait.String(), "doc.go", `--wait (\S+), --once-per`},
		{maxPeriod.String(), "doc.go", `--once-per (\S+) \(ten years`},
		{strconv.Itoa(poolCeiling), "doc.go", `outside 0 to (\d+) \(-1`},
		{strconv.Itoa(poolCeiling), "help", `connection counts 0 to (\d+)\.`},
		{defaultTimeout.String(), "operating.md", `end within .--timeout. \(default (\S+)\) \+`},
		{finishSlack.String(), "operating.md", `end within .--timeout. \(default \S+\) \+ (\S+)\.`},
		{finishSlack.String(), "operating.md", `within .--wait. \(or .--timeout.\) \+ (\S+),`},
		{releaseTimeout.String(), "operating.md", `and the release take at most (\S+),`},
		{finishSlack.String(), "operating.md", `the cleanups (\S+) more`},
		{maxTTL.String(), "operating.md", `.--timeout. above (\S+),`},
		{maxWait.String(), "operating.md", `.--wait. above (\S+),`},
		{maxPeriod.String(), "operating.md", `.--once-per. above (\S+);`},
		{strconv.Itoa(poolCeiling), "operating.md", `outside 0 to (\d+)\.`},
		{verifierEnv, "operating.md", `store in .(\w+). rather`},
		{verifierEnv, "doc.go", `redis://\.\.\., or else the (\S+) environment`},
		{verifierEnv, "help", `\(default: \$(\S+), which`},
		{defaultTTL.String(), "help", `--ttl D lease ttl \(default (\S+),`},
		{defaultGrace.String(), "help", `--grace D SIGTERM to SIGKILL delay \(default (\S+),`},
		{defaultTimeout.String(), "help", `slow or unreachable Redis \(default (\S+),`},
		{defaultTTL.String(), "doctor help", `--ttl D the leases' ttl \(default (\S+)\)`},
		{killMargin.String(), "doc.go", `a margin \((\S+), at most ttl/10\)`},
		{killMargin.String(), "help", `cut to ttl/2 - (\S+) if longer`},
		{killMargin.String(), "help", `lands (\S+) before the lease's deadline`},
		{killMargin.String(), "help", `then SIGKILL (\S+) later`},
		{finishSlack.String(), "doc.go", `within --timeout \(default \S+\) \+ (\S+)\.`},
		{finishSlack.String(), "doc.go", `end within D \+ (\S+),`},
		{releaseTimeout.String(), "doc.go", `and the release share (\S+),`},
		{finishSlack.String(), "doc.go", `the cleanups end within (\S+) more`},
		{doctorTimeout.String(), "doc.go", `doctor ends within (\S+)\.`},
		{finishSlack.String(), "help", `end within --wait \(or --timeout\) \+ (\S+);`},
		{releaseTimeout.String(), "help", `the release take at most (\S+) \+`},
		{finishSlack.String(), "help", `the release take at most \S+ \+ (\S+)`},
		{strconv.Itoa(lease.MaxPermits), "help", `--permits N take a permit of semaphore NAME of N permits \(1 to (\d+)\)`},
		{strconv.Itoa(lease.MaxPermits), "doc.go", `With --permits N \(1 to (\d+)\)`},
		{strconv.Itoa(lease.MaxPermits), "doc.go", `a --permits outside 1 to (\d+) \(lease.MaxPermits\)`},
		{strconv.Itoa(lease.MaxPermits), "operating.md", `.run --permits N. \(1 to (\d+)\)`},
	} {
		ms := regexp.MustCompile(c.re).FindAllStringSubmatch(texts[c.where], -1)
		if len(ms) == 0 {
			t.Errorf("%s: %s not found", c.where, c.re)
		}
		for _, m := range ms {
			if sameDuration(m[1], c.want) {
				continue
			}
			if m[1] != c.want {
				t.Errorf("%s states %q where the command uses %q (%s)", c.where, m[1], c.want, c.re)
			}
		}
	}
}

// sameDuration reports whether a and b are the same duration written two
// ways (0.4s, 400ms).
func sameDuration(a, b string) bool {
	da, errA := time.ParseDuration(a)
	db, errB := time.ParseDuration(b)
	return errA == nil && errB == nil && da == db
}
