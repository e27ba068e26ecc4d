//go:build unix && !linux

package main

import "syscall"

// sysProcAttr puts the operator in its own process group; without a parent-death signal here,
// only a clean stop of netfleet-dev stops it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
