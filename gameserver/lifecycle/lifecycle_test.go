package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
)

func alloc(uid string) netcode.Allocation {
	return netcode.Allocation{Name: "gsa-" + uid, UID: uid, Payload: `{"map":"dust"}`}
}

func TestTransitions(t *testing.T) {
	ctx := context.Background()
	type step struct {
		name  string
		do    func(l *Lifecycle) error
		err   error // wrapped sentinel, nil for success
		state netcode.LifecycleState
	}
	ready := func(l *Lifecycle) error { return l.Ready() }
	reserve := func(l *Lifecycle) error { return l.Reserve(time.Hour) }
	shutdown := func(l *Lifecycle) error { return l.Shutdown() }
	allocate := func(uid string) func(l *Lifecycle) error {
		return func(l *Lifecycle) error { _, err := l.Allocate(ctx, alloc(uid)); return err }
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"reusable server", []step{
			{"allocate", allocate("a"), nil, netcode.LifecycleAllocated},
			{"ready ends the match", ready, nil, netcode.LifecycleReady},
			{"allocate again", allocate("b"), nil, netcode.LifecycleAllocated},
		}},
		{"backfill", []step{
			{"allocate", allocate("a"), nil, netcode.LifecycleAllocated},
			{"backfill", allocate("b"), nil, netcode.LifecycleAllocated},
			{"reserve while allocated", reserve, ErrOrder, netcode.LifecycleAllocated},
		}},
		{"reserve then allocate", []step{
			{"reserve", reserve, nil, netcode.LifecycleReserved},
			{"reserve again", reserve, nil, netcode.LifecycleReserved},
			{"allocate", allocate("a"), nil, netcode.LifecycleAllocated},
		}},
		{"shutdown is final", []step{
			{"allocate", allocate("a"), nil, netcode.LifecycleAllocated},
			{"shutdown", shutdown, nil, netcode.LifecycleShutdown},
			{"ready", ready, ErrShutdown, netcode.LifecycleShutdown},
			{"reserve", reserve, ErrShutdown, netcode.LifecycleShutdown},
			{"allocate", allocate("b"), ErrShutdown, netcode.LifecycleShutdown},
			{"shutdown again", shutdown, ErrShutdown, netcode.LifecycleShutdown},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New()
			for _, s := range tc.steps {
				v := l.Status().Version
				err := s.do(l)
				if s.err == nil && err != nil || s.err != nil && !errors.Is(err, s.err) {
					t.Fatalf("%s: err %v, want %v", s.name, err, s.err)
				}
				st := l.Status()
				if st.State != s.state {
					t.Fatalf("%s: state %s, want %s", s.name, st.State, s.state)
				}
				if s.err != nil && st.Version != v {
					t.Fatalf("%s: a refused call changed the version", s.name)
				}
			}
		})
	}
}

func TestAllocateDeliversOnceAndFirst(t *testing.T) {
	l := New()
	var seen []string
	l.SetDeliver(func(_ context.Context, a netcode.Allocation) error {
		// The game sees the allocation before the process reports it Allocated.
		if st := l.Status(); st.State == netcode.LifecycleAllocated && st.LastAllocationUID == a.UID {
			t.Errorf("allocation %s was committed before the game saw it", a.UID)
		}
		seen = append(seen, a.UID+":"+a.Payload)
		return nil
	})
	for range 2 {
		if _, err := l.Allocate(context.Background(), alloc("a")); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 1 || seen[0] != `a:{"map":"dust"}` {
		t.Fatalf("game saw %q, want the allocation once", seen)
	}
	cur, ok := l.CurrentAllocation()
	if !ok || cur.UID != "a" || !l.InMatch("a") {
		t.Fatalf("current allocation %+v %v", cur, ok)
	}
	if err := l.Ready(); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.CurrentAllocation(); ok || l.InMatch("a") {
		t.Fatal("the ended match's allocation is still current")
	}
	if st := l.Status(); st.LastAllocationUID != "a" || st.Allocation != nil {
		t.Fatalf("after the match: %+v", st)
	}
}

func TestAllocateNotCommittedWhenGameDoesNotTakeIt(t *testing.T) {
	l := New()
	l.SetDeliver(func(ctx context.Context, _ netcode.Allocation) error { <-ctx.Done(); return ctx.Err() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.Allocate(ctx, alloc("a")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if st := l.Status(); st.State != netcode.LifecycleReady || st.LastAllocationUID != "" {
		t.Fatalf("an undelivered allocation was recorded: %+v", st)
	}
}

func TestReserveExpires(t *testing.T) {
	l := New()
	if err := l.Reserve(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := l.Reserve(0); err == nil {
		t.Fatal("a zero reservation was accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st := l.Status()
	for st.State == netcode.LifecycleReserved && ctx.Err() == nil {
		st = l.Wait(ctx, st.Version)
	}
	if st.State != netcode.LifecycleReady {
		t.Fatalf("state %s after the reservation ran out", st.State)
	}
}

func TestWaitWakesOnChange(t *testing.T) {
	l := New()
	v := l.Status().Version
	go l.SetPlayers(3)
	st := l.Wait(context.Background(), v)
	if st.Players != 3 || st.Version == v {
		t.Fatalf("%+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if got := l.Wait(ctx, st.Version); got.Version != st.Version {
		t.Fatal("Wait returned a new version without a change")
	}
}

func TestCapacityAndCounters(t *testing.T) {
	l := New()
	if err := l.SetCapacity(-1); err == nil {
		t.Fatal("negative capacity accepted")
	}
	if err := l.SetCapacity(netcode.MaxCapacity + 1); err == nil {
		t.Fatal("capacity over the limit accepted")
	}
	if err := l.SetCapacity(16); err != nil || l.Capacity() != 16 {
		t.Fatalf("capacity: %v %d", err, l.Capacity())
	}
	for _, bad := range []string{"", "Bad", "-x", "a b"} {
		if err := l.SetCounter(bad, 1); err == nil {
			t.Fatalf("counter name %q accepted", bad)
		}
	}
	for i := range netcode.MaxCounters {
		if err := l.SetCounter("c"+string(rune('a'+i)), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetCounter("overflow", 1); err == nil {
		t.Fatal("a counter over the limit was accepted")
	}
	if err := l.SetCounter("ca", 7); err != nil {
		t.Fatal("an existing counter could not be set:", err)
	}
	st := l.Status()
	st.Counters["ca"] = 99 // the status is a copy
	if l.Status().Counters["ca"] != 7 {
		t.Fatal("Status shares its counters map")
	}
}

// TestRedeliveryOfAnEndedMatch: an allocation delivered again after its match ended (or the
// game shut down) is refused with ErrAllocationEnded and reaches the game no more.
func TestRedeliveryOfAnEndedMatch(t *testing.T) {
	ctx := context.Background()
	l := New()
	events := 0
	l.SetDeliver(func(context.Context, netcode.Allocation) error { events++; return nil })
	if _, err := l.Allocate(ctx, alloc("a")); err != nil {
		t.Fatal(err)
	}
	if err := l.Ready(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allocate(ctx, alloc("a")); !errors.Is(err, netcode.ErrAllocationEnded) {
		t.Fatalf("redelivery after the match: %v", err)
	}
	if st := l.Status(); st.State != netcode.LifecycleReady || events != 1 {
		t.Fatalf("state %s, %d events", st.State, events)
	}
	if _, err := l.Allocate(ctx, alloc("b")); err != nil {
		t.Fatal(err)
	}
	if err := l.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allocate(ctx, alloc("b")); !errors.Is(err, netcode.ErrAllocationEnded) {
		t.Fatalf("redelivery after shutdown: %v", err)
	}
	if _, err := l.Allocate(ctx, alloc("c")); !errors.Is(err, ErrShutdown) {
		t.Fatalf("a new allocation after shutdown: %v", err)
	}
}
