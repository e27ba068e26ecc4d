//go:build !linux

package linkem

import (
	"errors"
	"time"
)

// chanWaiter is the portable waiter: a Go timer, so sleeps are as precise as the runtime's timers
// (about a millisecond); the spin phase makes up only what the early margin covers.
type chanWaiter struct {
	ch chan struct{}
	t  *time.Timer
}

func newWaiter() (waiter, error) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &chanWaiter{ch: make(chan struct{}, 1), t: t}, nil
}

func tuneThread(realtime bool) error {
	if realtime {
		return errors.New("realtime priority is only supported on Linux")
	}
	return nil
}

func (w *chanWaiter) wait(ns int64) bool {
	if ns < 0 {
		<-w.ch
		return true
	}
	w.t.Reset(time.Duration(ns))
	defer w.t.Stop()
	select {
	case <-w.ch:
		return true
	case <-w.t.C:
		return false
	}
}

func (w *chanWaiter) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (w *chanWaiter) close() error { return nil }
