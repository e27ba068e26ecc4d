package main

import "syscall"

// sysProcAttr puts the operator in its own process group and has the kernel kill it if
// netfleet-dev dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
