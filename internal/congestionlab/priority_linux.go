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
// a thread's own niceness only ranks it within its session, so a process without a controlling
// terminal (CI, a test binary under go test) first moves to a session of its own (and so an
// autogroup of its own, which leaves whatever started it alone) and sets that autogroup's
// niceness. A process run from a terminal stays in its session, so that Ctrl-C still reaches it,
// and so does a process group leader, whose autogroup others share; they only rank their threads. Every thread's niceness is set; threads created later inherit it
// from the thread that creates them. It needs root or CAP_SYS_NICE.
func boostPriority(nice int) error {
	if tty, err := os.Open("/dev/tty"); err == nil {
		_ = tty.Close()
	} else if _, err := syscall.Setsid(); err == nil {
		// A group leader cannot start a session (EPERM); its autogroup is shared, so it is left as
		// it is.
		if err := os.WriteFile("/proc/self/autogroup", []byte(strconv.Itoa(nice)), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("congestionlab: autogroup niceness: %w", err)
		}
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
