// Package lifecycle holds a game-server process's lifecycle: its state (Ready, Reserved,
// Allocated, Shutdown), the allocation of its current match, its connected players, the capacity
// and the named counters the game set. The game drives it through the calls of game.Lifecycle
// (Ready, Reserve, Shutdown, SetCapacity, SetCounter); the operator delivers allocations to it
// and follows it through the admin API (gameserver/admin), which long-polls Wait.
//
// The state machine:
//
//	Ready <-> Reserved          Reserve(d) / d elapsed or Ready()
//	Ready | Reserved -> Allocated   an allocation is delivered (Allocate)
//	Allocated -> Allocated      another allocation of the same match (backfill)
//	Allocated -> Ready          Ready(): the match is over, the server takes another one
//	any -> Shutdown             Shutdown(): final
//
// Any other call is out of order and returns an error wrapping ErrOrder, leaving the state as
// it was; after Shutdown every transition returns ErrShutdown. State never goes backwards past
// Shutdown.
//
// Every method is safe for concurrent use and none blocks for long: the game calls them from
// its tick goroutine. It imports api/netcode and nothing else of netfleet.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
)

// Errors of out-of-order transitions.
var (
	// ErrOrder: the transition is not allowed from the current state.
	ErrOrder = errors.New("lifecycle: transition out of order")
	// ErrShutdown: the process has shut down; nothing changes its state any more.
	ErrShutdown = errors.New("lifecycle: the server has shut down")
)

// maxMatchAllocations bounds the allocations remembered for one match (backfill), and
// maxEndedAllocations those of matches that are over.
const (
	maxMatchAllocations = 64
	maxEndedAllocations = 256
)

// Deliver hands an allocation to the game and returns once the game has seen it (the server
// loop runs it on its tick goroutine). It returns ctx.Err() if the game did not take it in time.
type Deliver func(ctx context.Context, a netcode.Allocation) error

// Lifecycle is one process's lifecycle. Create it with New.
type Lifecycle struct {
	now func() time.Time

	// deliverMu serializes deliveries: the check, the game's event and the commit are one step.
	deliverMu sync.Mutex
	deliver   atomic.Pointer[Deliver]

	mu       sync.Mutex
	st       netcode.LifecycleStatus
	match    []netcode.AllocationRef // the allocations of the current match, oldest first
	ended    []string                // UIDs of allocations whose match is over, oldest first
	changed  chan struct{}           // closed and replaced on every change
	reserveT *time.Timer
	// current is the latest allocation of the current match, readable without mu.
	current atomic.Pointer[netcode.AllocationRef]
	// shutdown closes when the state becomes Shutdown.
	shutdown chan struct{}
}

// New returns a Ready lifecycle. Its status leaves InstanceID to the admin API, which knows the
// process's.
func New() *Lifecycle {
	return &Lifecycle{
		now:      time.Now,
		st:       netcode.LifecycleStatus{Version: 1, State: netcode.LifecycleReady},
		changed:  make(chan struct{}),
		shutdown: make(chan struct{}),
	}
}

// SetDeliver installs the function that hands allocations to the game; without one an
// allocation is recorded without a game event.
func (l *Lifecycle) SetDeliver(d Deliver) { l.deliver.Store(&d) }

// Status returns the lifecycle now.
func (l *Lifecycle) Status() netcode.LifecycleStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snapshot()
}

func (l *Lifecycle) snapshot() netcode.LifecycleStatus {
	st := l.st
	st.Counters = maps.Clone(l.st.Counters)
	if l.st.Allocation != nil {
		a := *l.st.Allocation
		st.Allocation = &a
	}
	return st
}

// Wait returns the status once its version differs from since, or when ctx ends (then with the
// status as it is).
func (l *Lifecycle) Wait(ctx context.Context, since uint64) netcode.LifecycleStatus {
	for {
		l.mu.Lock()
		if l.st.Version != since {
			st := l.snapshot()
			l.mu.Unlock()
			return st
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return l.Status()
		}
	}
}

// ShutdownC closes when the game shuts down.
func (l *Lifecycle) ShutdownC() <-chan struct{} { return l.shutdown }

// CurrentAllocation returns the latest allocation of the current match, and false when the
// process is not Allocated. It takes no lock: the server loop may call it on every connect.
func (l *Lifecycle) CurrentAllocation() (netcode.AllocationRef, bool) {
	a := l.current.Load()
	if a == nil {
		return netcode.AllocationRef{}, false
	}
	return *a, true
}

// Match appends the uids of the current match's allocations, the first one and those that
// backfilled it, to dst (none when the process is not Allocated), and returns the lifecycle's
// version, which changes with every change of it: a caller that keeps the uids asks again only
// when the version moved.
func (l *Lifecycle) Match(dst []string) ([]string, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.State == netcode.LifecycleAllocated {
		for _, a := range l.match {
			dst = append(dst, a.UID)
		}
	}
	return dst, l.st.Version
}

// InMatch reports whether uid is one of the allocations of the current match (the first one or
// a backfill).
func (l *Lifecycle) InMatch(uid string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inMatchLocked(uid)
}

// Capacity returns the capacity the game set, 0 when it has not.
func (l *Lifecycle) Capacity() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.st.Capacity)
}

// bump records a change; l.mu is held.
func (l *Lifecycle) bump() {
	l.st.Version++
	close(l.changed)
	l.changed = make(chan struct{})
}

// Allocate delivers an allocation (validated by the caller, netcode.ValidateAllocation): the
// game sees it through Deliver, then the process is Allocated. It reports whether the
// allocation was new; a second delivery of an allocation of the current match is acknowledged
// without reaching the game again, and one of a match that is over is refused with
// netcode.ErrAllocationEnded (an operator that retried a delivery that had gone through). It
// refuses a new one after Shutdown (ErrShutdown).
func (l *Lifecycle) Allocate(ctx context.Context, a netcode.Allocation) (bool, error) {
	l.deliverMu.Lock()
	defer l.deliverMu.Unlock()
	l.mu.Lock()
	switch {
	case slices.Contains(l.ended, a.UID):
		l.mu.Unlock()
		return false, netcode.ErrAllocationEnded
	case l.st.State == netcode.LifecycleShutdown:
		l.mu.Unlock()
		return false, ErrShutdown
	case l.st.State == netcode.LifecycleAllocated && l.inMatchLocked(a.UID):
		l.mu.Unlock()
		return false, nil
	}
	l.mu.Unlock()

	if d := l.deliver.Load(); d != nil {
		if err := (*d)(ctx, a); err != nil {
			return false, fmt.Errorf("lifecycle: deliver allocation %s: %w", a.UID, err)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.State == netcode.LifecycleShutdown {
		// The game shut down while it saw the allocation.
		return false, ErrShutdown
	}
	if l.st.State != netcode.LifecycleAllocated {
		l.match = l.match[:0]
	}
	ref := netcode.AllocationRef{Name: a.Name, UID: a.UID}
	if len(l.match) == maxMatchAllocations {
		l.match = append(l.match[:0], l.match[1:]...)
	}
	l.match = append(l.match, ref)
	l.stopReserve()
	l.st.State, l.st.ReservedUntil = netcode.LifecycleAllocated, time.Time{}
	l.st.Allocation, l.st.LastAllocationUID = &ref, ref.UID
	l.current.Store(&ref)
	l.bump()
	return true, nil
}

func (l *Lifecycle) inMatchLocked(uid string) bool {
	for _, a := range l.match {
		if a.UID == uid {
			return true
		}
	}
	return false
}

// Ready makes the server available for a match again: it ends the current match (Allocated) or
// a reservation (Reserved). It is a no-op on a Ready server.
func (l *Lifecycle) Ready() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.st.State {
	case netcode.LifecycleShutdown:
		return ErrShutdown
	case netcode.LifecycleReady:
		return nil
	}
	l.toReady()
	return nil
}

// endMatch remembers the current match's allocations as ended and forgets the match; l.mu is
// held.
func (l *Lifecycle) endMatch() {
	for _, a := range l.match {
		if len(l.ended) == maxEndedAllocations {
			l.ended = append(l.ended[:0], l.ended[1:]...)
		}
		l.ended = append(l.ended, a.UID)
	}
	l.match = l.match[:0]
}

// toReady moves to Ready; l.mu is held.
func (l *Lifecycle) toReady() {
	l.stopReserve()
	l.endMatch()
	l.current.Store(nil)
	l.st.State, l.st.ReservedUntil, l.st.Allocation = netcode.LifecycleReady, time.Time{}, nil
	l.bump()
}

// Reserve holds a Ready server back from allocation for d (at least a millisecond), after which
// it is Ready again. A Reserved server may be reserved again, which sets a new deadline; an
// Allocated one may not (ErrOrder).
func (l *Lifecycle) Reserve(d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("lifecycle: reserve for %v: the duration must be at least 1ms", d)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.st.State {
	case netcode.LifecycleShutdown:
		return ErrShutdown
	case netcode.LifecycleAllocated:
		return fmt.Errorf("%w: an Allocated server cannot be reserved; call Ready when the match ends", ErrOrder)
	}
	l.stopReserve()
	until := l.now().Add(d)
	l.st.State, l.st.ReservedUntil = netcode.LifecycleReserved, until
	l.reserveT = time.AfterFunc(d, func() { l.unreserve(until) })
	l.bump()
	return nil
}

// unreserve ends the reservation that lasts until, if it still holds.
func (l *Lifecycle) unreserve(until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.State == netcode.LifecycleReserved && l.st.ReservedUntil.Equal(until) {
		l.toReady()
	}
}

func (l *Lifecycle) stopReserve() {
	if l.reserveT != nil {
		l.reserveT.Stop()
		l.reserveT = nil
	}
}

// Shutdown ends the server: the match is over and the server is not reused. It is final; a
// second call returns ErrShutdown.
func (l *Lifecycle) Shutdown() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.State == netcode.LifecycleShutdown {
		return ErrShutdown
	}
	l.stopReserve()
	l.endMatch()
	l.current.Store(nil)
	l.st.State, l.st.ReservedUntil, l.st.Allocation = netcode.LifecycleShutdown, time.Time{}, nil
	l.bump()
	close(l.shutdown)
	return nil
}

// SetCapacity declares how many players the game takes, in [0, netcode.MaxCapacity]; 0
// withdraws the declaration.
func (l *Lifecycle) SetCapacity(n int) error {
	if n < 0 || n > netcode.MaxCapacity {
		return fmt.Errorf("lifecycle: capacity %d is not in [0, %d]", n, netcode.MaxCapacity)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.Capacity != int32(n) {
		l.st.Capacity = int32(n)
		l.bump()
	}
	return nil
}

// SetCounter sets the named counter (netcode.ValidCounterName) to v. At most netcode.MaxCounters
// counters exist.
func (l *Lifecycle) SetCounter(name string, v int64) error {
	if !netcode.ValidCounterName(name) {
		return fmt.Errorf("lifecycle: counter name %q: 1 to %d lower-case letters, digits, '-', '_' or '.'", name, netcode.MaxCounterNameBytes)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.st.Counters[name]
	if !ok && len(l.st.Counters) >= netcode.MaxCounters {
		return fmt.Errorf("lifecycle: counter %q: at most %d counters", name, netcode.MaxCounters)
	}
	if ok && old == v {
		return nil
	}
	if l.st.Counters == nil {
		l.st.Counters = map[string]int64{}
	}
	l.st.Counters[name] = v
	l.bump()
	return nil
}

// SetPlayers records the number of connected players; the server loop calls it as players join
// and leave.
func (l *Lifecycle) SetPlayers(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.Players != int32(n) {
		l.st.Players = int32(n)
		l.bump()
	}
}
