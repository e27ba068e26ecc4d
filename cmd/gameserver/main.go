// Command gameserver runs one netfleet game server with the demo game (gameserver/demo): a world
// of wandering entities and one avatar per player, which walks where the player's move input
// sends it. The process is gameserver/serve's: the server loop on the game's UDP port, the admin
// API on its own TCP port, live config pushes, peers, health, readiness and Prometheus metrics.
//
//	NETFLEET_ADMIN_TOKEN=... gameserver --game-port 7777 --admin-port 8080 --world-population 2000
//
// Besides serve's flags it takes the demo world's: --world-seed, --world-population,
// --world-half-extent and --world-frozen.
package main

import (
	"flag"

	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/serve"
)

func main() { serve.Main(spec()) }

// spec is the demo game with its flags.
func spec() serve.Spec {
	var (
		cfg        demo.GameConfig
		population int
		halfExtent float64
	)
	return serve.Spec{
		Name: "gameserver",
		Flags: func(fs *flag.FlagSet) {
			fs.Uint64Var(&cfg.World.Seed, "world-seed", 1, "seed of the demo world's simulation")
			fs.IntVar(&population, "world-population", 1000, "entities the demo world keeps alive, avatars not counted")
			fs.Float64Var(&halfExtent, "world-half-extent", 2000, "the world spans ±this many meters on X and Y")
			fs.BoolVar(&cfg.Frozen, "world-frozen", false, "do not simulate the world: nothing moves but joining avatars (idle-world measurements)")
		},
		New: func(s serve.Setup) (game.Game, *entity.Store, error) {
			cfg.World.Population = population
			cfg.World.HalfExtent = float32(halfExtent)
			cfg.Players = s.MaxPeers
			g, err := demo.NewGame(cfg)
			if err != nil {
				return nil, nil, err
			}
			// The demo game takes a player per peer slot; allocations that ask for room count
			// against it.
			if err := s.Lifecycle.SetCapacity(s.MaxPeers); err != nil {
				return nil, nil, err
			}
			return g, g.Store(), nil
		},
	}
}
