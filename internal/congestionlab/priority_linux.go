package congestionlab

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// boostPriority raises the process's CPU priority to nice. With the kernel's autogroup
// scheduling (the default on desktop and server kernels) CPU is shared between sessions first and
// a thread's own niceness only ranks it within its session, so the process first moves to a
// session of its own (and so an autogroup of its own, which leaves whatever started it alone) and
// sets that autogroup's niceness; then it sets every thread's niceness, for kernels without
// autogroups. Threads created later inherit it from the thread that creates them. It needs root or
// CAP_SYS_NICE.
func boostPriority(nice int) error {
	// EPERM: already a session or group leader; the autogroup is then shared, but still raised.
	if _, err := syscall.Setsid(); err != nil && !errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("congestionlab: new session: %w", err)
	}
	if err := os.WriteFile("/proc/self/autogroup", []byte(strconv.Itoa(nice)), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("congestionlab: autogroup niceness: %w", err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("congestionlab: list threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread may exit between the listing and this call; that is not a failure.
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("congestionlab: set niceness of thread %d: %w", tid, err)
		}
	}
	return nil
}
