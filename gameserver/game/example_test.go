package game_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// drift is a small game: every player is a ball that drifts at the velocity its last input
// asked for (two little-endian float32s, m/s). A server runs it with
// broadcast.New(broadcast.Options{Game: g, Store: g.st, ...}) or serve.Main.
type drift struct {
	st    *entity.Store
	balls map[int]entity.ID // by player slot
}

func (g *drift) Join(p game.Player) (entity.ID, error) {
	if len(g.balls) == 4 {
		return entity.None, game.Refuse(protocol.CloseStalled, "four players already")
	}
	id, err := g.st.Spawn(1, entity.Transform{})
	if err != nil {
		return entity.None, err
	}
	g.balls[p.Slot] = id
	return id, nil
}

func (g *drift) Leave(p game.Player, _ game.Leave) {
	_ = g.st.Despawn(g.balls[p.Slot])
	delete(g.balls, p.Slot)
}

func (g *drift) Input(p game.Player, in game.Input) {
	if len(in.Payload) != 8 {
		return // not an input of this game
	}
	x, _ := g.st.Get(g.balls[p.Slot])
	x.Vel[0] = math.Float32frombits(binary.LittleEndian.Uint32(in.Payload))
	x.Vel[1] = math.Float32frombits(binary.LittleEndian.Uint32(in.Payload[4:]))
	_ = g.st.Set(g.balls[p.Slot], &x) // a NaN or an infinity is refused, and the ball keeps its velocity
}

func (g *drift) Step(t *game.Tick) {
	for _, id := range g.balls {
		x, _ := t.Store.Get(id)
		x.Pos[0] += x.Vel[0] * t.Dt
		x.Pos[1] += x.Vel[1] * t.Dt
		_ = t.Store.Set(id, &x)
	}
}

// Example drives a game as the server loop does: a join, an input, then each tick the store's
// Advance, the game's Step and the store's Commit.
func Example() {
	st, _ := entity.NewStore(entity.Config{Capacity: 8, HalfExtent: 100})
	g := &drift{st: st, balls: map[int]entity.ID{}}
	ball, _ := g.Join(game.Player{Slot: 0})
	g.Input(game.Player{Slot: 0}, game.Input{Payload: binary.LittleEndian.AppendUint32(
		binary.LittleEndian.AppendUint32(nil, math.Float32bits(3)), math.Float32bits(-1.5))})
	for range 60 {
		st.Advance()
		tick := game.NewTick(st.Tick(), 1.0/60, st, nil)
		g.Step(&tick)
		st.Commit()
	}
	pos := st.States()[ball.Slot()].Pos
	fmt.Printf("after a second: (%.2f, %.2f) m\n", protocol.DequantizePos(pos[0]), protocol.DequantizePos(pos[1]))
	// Output: after a second: (3.00, -1.50) m
}
