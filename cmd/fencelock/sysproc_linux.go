//go:build linux

package main

import "syscall"

// sysProcAttr puts the command in a process group of its own (so that a lost
// lease ends all of it) and has the kernel send it SIGTERM if fencelock dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
