package game_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/netfleet/netfleet/"

// TestEngineImportsNoGame: no engine package links a game — neither the demo nor the examples —
// and the game contract and the entity store link neither the server loop nor the transport, so
// a game's rules build and test without cgo. The operator's packages link no game-server package,
// and the load bots do not link the server loop.
func TestEngineImportsNoGame(t *testing.T) {
	list := func(pattern string) map[string][]string {
		t.Helper()
		out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Deps " "}}`, pattern).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pattern, err)
		}
		deps := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			deps[f[0]] = f[1:]
		}
		return deps
	}
	forbid := func(pkgs map[string][]string, skip func(string) bool, bad ...string) {
		t.Helper()
		for pkg, deps := range pkgs {
			if skip(pkg) {
				continue
			}
			for _, d := range deps {
				for _, b := range bad {
					if d == module+b || strings.HasPrefix(d, module+b+"/") {
						t.Errorf("%s imports %s", pkg, d)
					}
				}
			}
		}
	}
	engine := list("github.com/netfleet/netfleet/gameserver/...")
	if len(engine) < 10 {
		t.Fatalf("go list found %d engine packages", len(engine))
	}
	forbid(engine, func(p string) bool { return p == module+"gameserver/demo" }, "gameserver/demo", "examples")
	contract := map[string][]string{}
	for _, p := range []string{"gameserver/game", "gameserver/entity", "gameserver/demo", "examples/arena"} {
		contract[module+p] = list(module + p)[module+p]
	}
	forbid(contract, func(string) bool { return false }, "gameserver/broadcast", "gameserver/enet", "gameserver/snapshot", "gameserver/session")
	forbid(list("github.com/netfleet/netfleet/controllers/..."), func(string) bool { return false }, "gameserver")
	// The load bots speak the demo's input without linking the server they load.
	forbid(list("github.com/netfleet/netfleet/cmd/botswarm"), func(string) bool { return false }, "gameserver/broadcast", "gameserver/snapshot")
}
