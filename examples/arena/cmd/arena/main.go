// Command arena runs a game server with the arena example game (examples/arena): players walk
// an arena and fire projectiles. The process is gameserver/serve's — the server loop on the game's
// UDP port, the admin API with live config pushes, health, readiness and metrics — with the
// game's own flags:
//
//	NETFLEET_ADMIN_TOKEN=... arena --game-port 7777 --admin-port 8080 --arena-half-extent 100
package main

import (
	"flag"

	"github.com/netfleet/netfleet/examples/arena"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/serve"
)

func main() {
	var cfg arena.Config
	var half float64
	serve.Main(serve.Spec{
		Name: "arena",
		Flags: func(fs *flag.FlagSet) {
			fs.Float64Var(&half, "arena-half-extent", 100, "the arena spans ±this many meters on X and Y")
		},
		New: func(s serve.Setup) (game.Game, *entity.Store, error) {
			cfg.HalfExtent = float32(half)
			cfg.MaxPlayers = s.MaxPeers
			cfg.Lifecycle = s.Lifecycle
			g, err := arena.New(cfg)
			if err != nil {
				return nil, nil, err
			}
			return g, g.Store(), nil
		},
		InterestRadius: 150,
	})
}
