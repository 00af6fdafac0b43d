package notify

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// ready reports whether w's subscription is confirmed within 5s.
func ready(w *Waiter) bool {
	select {
	case <-w.ready:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// TestWantedAgain: a channel that its last waiter leaves and a new waiter
// wants again before the writer drops it is listening at once (no
// SUBSCRIBE, so no confirmation, would come for it: the new waiter would
// wait out readyWait); one the writer did drop is confirmed again after a
// new SUBSCRIBE.
func TestWantedAgain(t *testing.T) {
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	n := New(rdb)
	ctx := t.Context()

	w1 := n.Register(ctx, "ch", "a")
	if !ready(w1) {
		t.Fatal("first subscription not confirmed")
	}
	for i := range 50 {
		n.Unregister(w1)
		w1 = n.Register(ctx, "ch", "a")
		if !ready(w1) {
			t.Fatalf("round %d: a channel wanted again is not listening", i)
		}
	}
	n.Unregister(w1)
	// Let the writer drop it, then want it again.
	c := w1.conn
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		dropped := !c.live["ch"] && !c.dropping["ch"]
		c.mu.Unlock()
		if dropped || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w2 := n.Register(ctx, "ch", "b")
	if !ready(w2) {
		t.Fatal("a dropped channel is not subscribed again")
	}
	n.Unregister(w2)
}
