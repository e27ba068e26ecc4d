// Package demo is netfleet's demo game, one game among others on the engine's public API: a
// world of entities that wander between waypoints, rest, spawn and despawn (World), one avatar
// per player that walks where the player's move input sends it, and a frozen mode in which nothing
// moves but joining avatars, for idle-server measurements.
//
// Game implements game.Game. Its one input is a move (AppendMove, DecodeMove): the sender's
// avatar walks to a point. A player joins when the world has a free slot for its avatar and is
// refused with protocol.CloseStalled (try again later) when it is full; a player that leaves takes
// its avatar with it.
//
// It imports the engine's public packages (entity, game, protocol) and nothing of the server
// loop, so tools that only speak the demo's input, such as load bots, link none of it.
package demo

import (
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// GameConfig configures a Game.
type GameConfig struct {
	// World configures the world. A Capacity of 0 sizes it to the population and Players avatars.
	World Config
	// Players is how many avatars a world of Capacity 0 has room for. Default 256.
	Players int
	// Frozen steps the world without simulating it: nothing moves, spawns or despawns but the
	// avatars of joining players. For idle-world measurements.
	Frozen bool
}

// Game is the demo game.
type Game struct {
	world  *World
	frozen bool
	// avatar is each player slot's avatar.
	avatar map[int]entity.ID
}

// NewGame creates the demo game and its world.
func NewGame(cfg GameConfig) (*Game, error) {
	if cfg.Players == 0 {
		cfg.Players = 256
	}
	if cfg.World.Capacity == 0 {
		cfg.World.Capacity = min(cfg.World.Population+cfg.Players, protocol.MaxEntities)
	}
	w, err := NewWorld(cfg.World)
	if err != nil {
		return nil, err
	}
	return &Game{world: w, frozen: cfg.Frozen, avatar: make(map[int]entity.ID)}, nil
}

// World is the game's simulation.
func (g *Game) World() *World { return g.world }

// Store is the entity store the game writes, for the server loop.
func (g *Game) Store() *entity.Store { return g.world.Store() }

// Join spawns the player's avatar at a random point.
func (g *Game) Join(p game.Player) (entity.ID, error) {
	id, err := g.world.AddAvatar()
	if err != nil {
		return entity.None, game.Refuse(protocol.CloseStalled, "the world is full")
	}
	g.avatar[p.Slot] = id
	return id, nil
}

// Leave removes the player's avatar.
func (g *Game) Leave(p game.Player, _ game.Leave) {
	g.world.Remove(g.avatar[p.Slot])
	delete(g.avatar, p.Slot)
}

// Input applies a move: the player's avatar walks to the point. Anything else is input the demo
// does not know, and is ignored.
func (g *Game) Input(p game.Player, in game.Input) {
	if x, y, err := DecodeMove(in.Payload); err == nil {
		g.world.SetTarget(g.avatar[p.Slot], x, y)
	}
}

// SetFrozen freezes the world or lets it move again; call it on the tick goroutine.
func (g *Game) SetFrozen(frozen bool) { g.frozen = frozen }

// Step simulates one tick, unless the game is frozen.
func (g *Game) Step(t *game.Tick) {
	if g.frozen {
		return
	}
	g.world.Simulate(t.Dt)
}
