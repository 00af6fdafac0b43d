package lease

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// TestNotifierWantedAgain: a channel that its last waiter leaves and a new
// waiter wants again before the writer drops it is listening at once (no
// SUBSCRIBE, so no confirmation, would come for it: the new waiter would
// wait out readyWait); one the writer did drop is confirmed again after a
// new SUBSCRIBE.
func TestNotifierWantedAgain(t *testing.T) {
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	n := &notifier{rdb: rdb}
	ready := func(w *waiter) bool {
		select {
		case <-w.ready:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}

	w1 := n.register("ch", "a")
	if !ready(w1) {
		t.Fatal("first subscription not confirmed")
	}
	for i := range 50 {
		n.unregister(w1)
		w1 = n.register("ch", "a")
		if !ready(w1) {
			t.Fatalf("round %d: a channel wanted again is not listening", i)
		}
	}
	n.unregister(w1)
	// Let the writer drop it, then want it again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n.mu.Lock()
		dropped := !n.live["ch"] && !n.dropping["ch"]
		n.mu.Unlock()
		if dropped || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w2 := n.register("ch", "b")
	if !ready(w2) {
		t.Fatal("a dropped channel is not subscribed again")
	}
	n.unregister(w2)
}
