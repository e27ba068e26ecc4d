package linkem

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// eventWaiter sleeps in ppoll(2) on an eventfd: ppoll takes a nanosecond timeout, where Go's
// timers round sub-millisecond sleeps up to the netpoller's millisecond, and a write to the
// eventfd cuts the sleep short.
type eventWaiter struct {
	fd int
}

func newWaiter() (waiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &eventWaiter{fd: fd}, nil
}

// tuneThread shrinks the calling thread's timer slack from the default 50 µs to 1 ns, so the
// kernel does not defer its wake-ups; failing that only costs precision, so it is not an error.
// With realtime it also moves the thread to SCHED_FIFO priority 1 — above every normal thread,
// below any other realtime one — so a loaded machine does not delay releases by whole scheduler
// slices.
func tuneThread(realtime bool) error {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	if !realtime {
		return nil
	}
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
		return fmt.Errorf("realtime priority (needs root or CAP_SYS_NICE): %w", err)
	}
	return nil
}

func (w *eventWaiter) wait(ns int64) bool {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	var ts *unix.Timespec
	if ns >= 0 {
		t := unix.NsecToTimespec(ns)
		ts = &t
	}
	n, err := unix.Ppoll(fds, ts, nil)
	if err != nil || n == 0 {
		return false // timeout, or EINTR: the caller re-checks the heap either way
	}
	var buf [8]byte
	_, _ = unix.Read(w.fd, buf[:]) // drain; EAGAIN means another wait already drained it
	return true
}

func (w *eventWaiter) wake() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	// The only failure for a non-blocking eventfd write is EAGAIN at a counter near 2^64, which
	// already means "woken".
	_, _ = unix.Write(w.fd, one[:])
}

func (w *eventWaiter) close() error {
	if err := unix.Close(w.fd); err != nil && !errors.Is(err, unix.EBADF) {
		return fmt.Errorf("close eventfd: %w", err)
	}
	return nil
}
