package broadcast

import (
	"context"
	"sync"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/lifecycle"
)

// allocRecorder is a recorder that also learns its allocations (game.Allocatable).
type allocRecorder struct {
	*recorder

	amu        sync.Mutex
	allocs     []game.Allocation
	duringStep int // allocations that arrived during a Step
}

func (g *allocRecorder) Allocated(a game.Allocation) {
	g.mu.Lock()
	during := g.inStep
	g.mu.Unlock()
	g.amu.Lock()
	defer g.amu.Unlock()
	if during {
		g.duringStep++
	}
	g.allocs = append(g.allocs, a)
}

// TestAllocatedReachesTheGame: a delivered allocation reaches the game's Allocated between two
// ticks, before Allocate returns, once per allocation; the lifecycle counts the connected
// players and names the current allocation.
func TestAllocatedReachesTheGame(t *testing.T) {
	rec := newRecorder(t)
	g := &allocRecorder{recorder: rec}
	lc := lifecycle.New()
	b := startServer(t, Options{Game: g, Store: rec.st, MaxPeers: 4, InterestRadius: 150, Lifecycle: lc})
	a := netcode.Allocation{Name: "m1", UID: "u1", Labels: map[string]string{"mode": "ctf"}, Payload: `{"map":"dust"}`, PlayerRoom: 2}
	for range 2 {
		fresh, err := lc.Allocate(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		g.amu.Lock()
		n := len(g.allocs)
		g.amu.Unlock()
		if n != 1 {
			t.Fatalf("after Allocate (new %v) the game saw %d allocations, want 1", fresh, n)
		}
	}
	g.amu.Lock()
	got := g.allocs[0]
	if got.Name != "m1" || got.UID != "u1" || got.Labels["mode"] != "ctf" || got.Payload != `{"map":"dust"}` || got.PlayerRoom != 2 || g.duringStep != 0 {
		t.Errorf("the game saw %+v (%d during a Step)", got, g.duringStep)
	}
	g.amu.Unlock()
	if cur, ok := lc.CurrentAllocation(); !ok || cur.UID != "u1" {
		t.Errorf("current allocation %+v %v", cur, ok)
	}

	bots := swarm{newBot(t, b.Address(), 101), newBot(t, b.Address(), 102)}
	bots.until(t, "connected", bots.allUp)
	bots.until(t, "players counted", func() bool { return lc.Status().Players == 2 })
	bots[0].peer.Disconnect(1000)
	bots.until(t, "a leave counted", func() bool { return lc.Status().Players == 1 })
}
