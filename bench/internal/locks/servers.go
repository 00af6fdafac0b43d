package locks

import "strings"

// OnServer names lock's row when it runs on another kind of server than
// the run's first: OnServer("lease", "valkey") is "lease@valkey".
func OnServer(lock, kind string) string { return lock + "@" + kind }

// SplitServer splits a name made by OnServer into the lock and the kind of
// server; kind is "" for a lock on the run's first server.
func SplitServer(name string) (lock, kind string) {
	lock, kind, _ = strings.Cut(name, "@")
	return lock, kind
}
