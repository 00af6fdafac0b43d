//go:build race

package protocol_test

func init() { raceBuild = true }
