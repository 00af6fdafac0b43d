//go:build unix && !linux

package main

import "syscall"

// sysProcAttr puts the command in a process group of its own, so that a lost
// lease ends all of it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
