// Package transport is how a node's calls reach its Redis: batched into
// pipelines when they overlap ([Transport], batch.go and conn.go), saying
// as a value what each did to the server ([Sent], sent.go), with a direct
// dial that tells a server that refuses connections from a slow one
// ([Prober], probe.go). It goes through the caller's own client and keeps
// no process-global state.
package transport
