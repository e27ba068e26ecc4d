package podrunner

import "syscall"

// sysProcAttr puts a process in its own group and has the kernel kill it when the runner dies, so
// a crashed runner leaks no processes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
