package verifier

import (
	"context"
	"sync"
)

// keyLock is a set of mutexes, one per key, created on demand and dropped
// when nobody holds or waits for them. Waiting honours a context.
type keyLock struct {
	mu    sync.Mutex
	locks map[string]*keyEntry
}

type keyEntry struct {
	ch   chan struct{} // holds one value while locked
	refs int           // holders plus waiters
}

// lock waits until key is free or ctx ends. On success the caller must call
// the returned unlock exactly once.
func (k *keyLock) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = make(map[string]*keyEntry)
	}
	e := k.locks[key]
	if e == nil {
		e = &keyEntry{ch: make(chan struct{}, 1)}
		k.locks[key] = e
	}
	e.refs++
	k.mu.Unlock()

	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; k.release(key, e) }, nil
	case <-ctx.Done():
		k.release(key, e)
		return nil, ctx.Err()
	}
}

func (k *keyLock) release(key string, e *keyEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(k.locks, key)
	}
}
