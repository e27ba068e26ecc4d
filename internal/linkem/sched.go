package linkem

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"time"
)

// Spin bounds. The scheduler sleeps until shortly before a packet is due and spins the rest; how
// early it wakes tracks how late the kernel has been waking it (mean plus mean deviation, so most
// wakes land before the due time), within these bounds.
const (
	minEarly = 10 * int64(time.Microsecond)
	maxEarly = 200 * int64(time.Microsecond)
)

// packet is a datagram waiting for its departure time.
type packet struct {
	at  int64  // due time, ns on the proxy clock
	seq uint64 // ties broken in arrival order
	buf *[]byte
	n   int
	c   *client
	dir direction
}

// waiter is a sleep that another goroutine can cut short.
type waiter interface {
	// wait sleeps up to ns nanoseconds (forever if ns < 0) and reports whether wake ended it.
	wait(ns int64) bool
	wake()
	close() error
}

// scheduler releases packets at their due times: one goroutine, a min-heap, and a waiter. A push
// that becomes the new earliest packet wakes the loop; any other push does not.
type scheduler struct {
	clock   func() int64
	deliver func(p *packet) // sends and releases a due packet; called on the scheduler goroutine
	discard func(p *packet) // releases a packet that will never be sent

	w    waiter
	done chan struct{}

	mu         sync.Mutex
	heap       []packet
	seq        uint64
	sleepUntil int64 // the time the loop will next look at the heap
	closed     bool

	// Loop-owned: the kernel's wake-up lateness, mean and mean deviation (ns, averaged over about
	// the last 8 sleeps), and the early-wake margin derived from them.
	wakeMean, wakeDev, early int64

	latMu sync.Mutex
	late  histogram // release time minus due time, per packet
}

// newScheduler starts the release loop; with realtime its thread runs at realtime priority, or
// newScheduler fails.
func newScheduler(clock func() int64, deliver, discard func(*packet), realtime bool) (*scheduler, error) {
	w, err := newWaiter()
	if err != nil {
		return nil, err
	}
	s := &scheduler{
		clock: clock, deliver: deliver, discard: discard,
		w: w, done: make(chan struct{}), sleepUntil: math.MaxInt64, early: minEarly,
	}
	ready := make(chan error, 1)
	go s.run(realtime, ready)
	if err := <-ready; err != nil {
		<-s.done
		return nil, errors.Join(err, w.close())
	}
	return s, nil
}

// push queues p; false if the scheduler is closed (p is then the caller's).
func (s *scheduler) push(p packet) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	p.seq = s.seq
	s.seq++
	s.heap = append(s.heap, p)
	s.up(len(s.heap) - 1)
	wake := p.at < s.sleepUntil
	if wake {
		s.sleepUntil = p.at
	}
	s.mu.Unlock()
	if wake {
		s.w.wake()
	}
	return true
}

// close stops the loop, discards what is still queued and waits for the loop to end.
func (s *scheduler) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for i := range s.heap {
		s.discard(&s.heap[i])
	}
	s.heap = nil
	s.mu.Unlock()
	s.w.wake()
	<-s.done
	return s.w.close()
}

func (s *scheduler) run(realtime bool, ready chan<- error) {
	// The loop owns its thread, so it can be tuned (timer slack, priority) without affecting
	// other goroutines; never unlocking lets the thread die with the loop.
	runtime.LockOSThread()
	defer close(s.done)
	err := tuneThread(realtime)
	ready <- err
	if err != nil {
		return
	}
	batch := make([]packet, 0, 64)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		now := s.clock()
		for len(s.heap) > 0 && s.heap[0].at <= now {
			batch = append(batch, s.pop())
		}
		next := int64(math.MaxInt64)
		if len(s.heap) > 0 {
			next = s.heap[0].at
		}
		s.sleepUntil = next
		s.mu.Unlock()
		if len(batch) > 0 {
			s.send(batch)
			clear(batch)
			batch = batch[:0]
			continue
		}
		s.waitFor(next)
	}
}

func (s *scheduler) send(batch []packet) {
	for i := range batch {
		p := &batch[i]
		late := s.clock() - p.at
		s.deliver(p)
		s.latMu.Lock()
		s.late.record(time.Duration(late))
		s.latMu.Unlock()
	}
}

// waitFor sleeps until shortly before next, or spins if next is closer than the early margin.
func (s *scheduler) waitFor(next int64) {
	if next == math.MaxInt64 {
		s.w.wait(-1)
		return
	}
	rem := next - s.clock()
	if rem > s.early {
		target := next - s.early
		if woken := s.w.wait(rem - s.early); !woken {
			late := max(s.clock()-target, 0)
			dev := late - s.wakeMean
			s.wakeMean += dev / 8
			s.wakeDev += (max(dev, -dev) - s.wakeDev) / 8
			s.early = min(max(s.wakeMean+s.wakeDev, minEarly), maxEarly)
		}
		return
	}
	for s.clock() < next {
		// Spin: at most maxEarly, and only when a packet is due within it.
	}
}

// lateness summarizes how late packets left compared to their due times.
func (s *scheduler) lateness() Precision {
	s.latMu.Lock()
	defer s.latMu.Unlock()
	return Precision{
		Packets: s.late.total,
		P50:     s.late.quantile(0.50),
		P99:     s.late.quantile(0.99),
		Max:     s.late.max,
	}
}

// Heap on s.heap ordered by (at, seq); hand-written to avoid boxing packets in interfaces.

func (s *scheduler) less(i, j int) bool {
	a, b := &s.heap[i], &s.heap[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (s *scheduler) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			return
		}
		s.heap[i], s.heap[parent] = s.heap[parent], s.heap[i]
		i = parent
	}
}

func (s *scheduler) pop() packet {
	h := s.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = packet{}
	s.heap = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && s.less(l, m) {
			m = l
		}
		if r < last && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s.heap[i], s.heap[m] = s.heap[m], s.heap[i]
		i = m
	}
	return top
}
