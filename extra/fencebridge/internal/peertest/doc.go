// Package peertest holds tests only: the rolling switch from each peer
// library (redsync, redislock) through fencebridge, in a module of its own
// so that neither adapter module requires the other peer.
package peertest
