package sqlverifier

import "sync"

// knownCap bounds the resources a verifier remembers (at most 1 kB each).
const knownCap = 1 << 14

// known remembers resources whose row is known to exist, so that the MySQL
// guard creates a row (ensure.sql) once per resource and process, not at
// every call. Forgetting is harmless: it costs one read. A guard that
// misses the row forgets it, so a deleted row is made again.
type known struct {
	mu  sync.Mutex
	set map[string]struct{}
}

func (k *known) has(resource string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.set[resource]
	return ok
}

func (k *known) add(resource string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.set == nil || len(k.set) >= knownCap {
		k.set = make(map[string]struct{})
	}
	k.set[resource] = struct{}{}
}

func (k *known) del(resource string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.set, resource)
}
