// Package fence defines the fencing token that a fencelock lease hands out,
// its ordering, and how it travels: as text, in a context, and in an HTTP
// header.
//
//	fence.SetHeader(req.Header, l.Token())            // the client: a lease's token on a request
//	tok, ok, err := fence.FromHeader(r.Header)         // the server: read it back
//	ctx = fence.NewContext(ctx, tok)                   // and carry it to the storage
//
// A [Token] is issued by a lease on every successful acquisition. Its Seq
// grows with each acquisition of the same lock name, so a storage system that
// remembers the highest Seq it has seen for a resource can reject writes from
// a holder whose lease has since passed to someone else (see the verifier
// package). This is the answer to the "paused lock holder" problem described
// by Martin Kleppmann in "How to do distributed locking" (2016).
//
// Tokens are ordered by Seq only. Two tokens with the same Seq but different
// holders are a conflict, never equal: that can only happen when the
// counter went backwards (a Redis failover, restart or eviction), and a
// verifier must reject the second holder. Use [Token.Compare] for order and
// [Token.Conflicts] to detect that case.
//
// The package does no I/O.
package fence
