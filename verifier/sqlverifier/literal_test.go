package sqlverifier

import "testing"

// TestInline checks the literal form of the MySQL fast path: comment lines
// dropped (their ? are no placeholders), strings as hex literals, so no
// byte of a value appears in the text as itself.
func TestInline(t *testing.T) {
	s := newInline("-- a comment with ? in it\nUPDATE t SET a = ?, b = ?\n  -- another ?\nWHERE c = ?\n")
	got := s.with("x' OR '1'='1 \\", int64(-42), "")
	want := "UPDATE t SET a = X'7827204f5220273127" + "3d2731205c', b = -42\nWHERE c = X''"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	fast := flavors[MySQL].statements(MySQL, "`fence_tokens`").update
	if n := len(fast.parts) - 1; n != 8 {
		t.Fatalf("update.sql has %d placeholders outside comments, want 8", n)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("with: no panic for a missing argument")
		}
	}()
	s.with("only one")
}
