//go:build unix && !linux

package podrunner

import "syscall"

// sysProcAttr puts a process in its own group. Without a parent-death signal on this system, only
// a runner that stops cleanly kills its processes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
