// Package faults injects the failures that fencelock's tests and bench
// provoke for real: a TCP proxy that delays, holds back, cuts or redirects a
// link ([Proxy]), a paused process ([PauseFor], [StopSelf], [WaitStopped]),
// a failover to a lagging replica behind a virtual IP ([Failover]), and what
// a Redis node can do to its keys: expire them all at once as a forward
// clock jump does ([ExpireAll]), lose them to eviction ([Evict]) or to a
// restart without persistence ([Restart]).
//
// Servers come from [testenv]; this package only breaks them. It is for
// tests and the bench, never for production use.
package faults
