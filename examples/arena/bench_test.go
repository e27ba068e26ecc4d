package arena

import (
	"fmt"
	"math"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/snapshot"
)

// The tick benchmark is a server's data path for one tick of the arena, without the network:
// every player's inputs reach the game (a walk now and then, a fire whenever the cooldown allows),
// the game steps between the store's Advance and Commit, and every player's view handles its
// client's ACK of the last frame and builds its frame under the default budget, with state
// updates at 10 Hz as the arena's fleet runs them.

type benchArena struct {
	g      *Game
	views  []*snapshot.View
	frames []*snapshot.Frame
	tick   uint64
	buf    []byte
	ack    protocol.Ack
	bytes  int
	budget int
}

func newBenchArena(tb testing.TB, players int) *benchArena {
	tb.Helper()
	g := mustNew(tb, Config{MaxPlayers: players})
	nc := netcode.MustResolve(netcode.NetcodeConfig{Budget: netcode.BudgetConfig{StateUpdateHz: 10}})
	cfg := snapshot.FromNetcode(nc, 150)
	sh := snapshot.NewShared(g.Store().Capacity())
	ba := &benchArena{g: g, budget: int(*nc.Config().Budget.SnapshotBytesPerTick), buf: make([]byte, 0, 64)}
	for i := range players {
		id := join(tb, g, i)
		v, err := snapshot.NewView(g.Store(), sh, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		v.SetFocus(id)
		ba.views = append(ba.views, v)
		ba.frames = append(ba.frames, snapshot.NewFrame(netcode.DefaultBackpressureFrameBytes))
	}
	for range 240 { // into the steady state: every player walking and firing
		ba.step()
	}
	return ba
}

// step runs one tick.
func (ba *benchArena) step() {
	ba.tick++
	h := ba.g.cfg.HalfExtent
	for i := range ba.views {
		p := game.Player{Slot: i}
		if (ba.tick+uint64(i))%90 == 0 {
			a := float64(ba.tick*7+uint64(i)*131) / 100
			ba.buf = AppendWalk(ba.buf[:0], h*float32(math.Cos(a))*0.9, h*float32(math.Sin(a))*0.9)
			ba.g.Input(p, game.Input{Payload: ba.buf})
		}
		ba.buf = AppendFire(ba.buf[:0], float32(ba.tick%628)/100)
		ba.g.Input(p, game.Input{Payload: ba.buf})
	}
	st := ba.g.Store()
	st.Advance()
	tk := game.NewTick(st.Tick(), dt, st, nil)
	ba.g.Step(&tk)
	st.Commit()
	nowMs := int64(st.Tick()) * 16
	ba.bytes = 0
	for i, v := range ba.views {
		f := ba.frames[i]
		if f.Packets() > 0 { // the client received the last frame and acknowledges it now
			ba.ack = protocol.Ack{Latest: f.Seq(f.Packets() - 1), Received: 1<<f.Packets() - 1, LastAppliedTick: f.Tick()}
			if _, err := v.HandleAck(&ba.ack); err != nil {
				panic(err)
			}
		}
		if _, err := v.BuildFrame(ba.budget, nowMs, f); err != nil {
			panic(err)
		}
		ba.bytes += f.Bytes()
	}
}

// BenchmarkTick reports, per tick of the arena with 32 and 128 players: ns/op, bytes/tick over
// all players, and the entities in flight (players and projectiles).
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{32, 128} {
		b.Run(fmt.Sprintf("players=%d", n), func(b *testing.B) {
			ba := newBenchArena(b, n)
			bytes := 0
			b.ReportAllocs()
			for b.Loop() {
				ba.step()
				bytes += ba.bytes
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/tick")
			b.ReportMetric(float64(ba.g.Store().Count()), "entities")
		})
	}
}

// TestTickAllocatesNothing: once warm, an arena tick — inputs, the step with its spawns and
// despawns, and every view's frame — allocates nothing.
func TestTickAllocatesNothing(t *testing.T) {
	ba := newBenchArena(t, 16)
	if ba.g.Projectiles() == 0 {
		t.Fatal("no projectiles in flight: the benchmark measures no spawns")
	}
	if allocs := testing.AllocsPerRun(50, ba.step); allocs != 0 {
		t.Fatalf("%v allocations per tick, want 0", allocs)
	}
}
