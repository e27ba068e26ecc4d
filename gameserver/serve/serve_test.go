package serve

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// TestParseFlagsOverrideEnv: a flag wins over its variable, a variable over the default.
func TestParseFlagsOverrideEnv(t *testing.T) {
	env := map[string]string{
		netcode.EnvGamePort:      "7001",
		netcode.EnvAdminPort:     "9001",
		netcode.EnvBindAddress:   "127.0.0.2",
		netcode.EnvAdminToken:    "secret",
		netcode.EnvInitialConfig: `{"tickRateHz": 30}`,
	}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var population int
	spec := Spec{Flags: func(fs *flag.FlagSet) { fs.IntVar(&population, "population", 10, "") }}
	s, err := parse(spec, []string{"--game-port", "7002", "--netcode-config", `{"tickRateHz": 20}`, "--population", "99"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.gamePort != 7002 || s.adminPort != 9001 || s.bind.String() != "127.0.0.2" || s.token != "secret" ||
		s.netcode.Config().TickRateHz != 20 || s.tokenGenerated || population != 99 || s.interestRadius != 250 {
		t.Fatalf("settings %+v", s)
	}
	bad := [][]string{
		{"--bind", "::1"},
		{"--game-port", "70000"},
		{"--netcode-config", `{"tickRateHz": 5}`},
		{"--netcode-config", `{"noSuchField": 1}`},
		{"--log-level", "loud"},
		{"--interest-radius", "0"},
		{"--interest-radius", "NaN"},
		{"--no-such-flag"},
		{"extra"},
	}
	for _, args := range bad {
		if _, err := parse(spec, args, getenv, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
	s, err = parse(Spec{InterestRadius: 80}, nil, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil || !s.tokenGenerated || len(s.token) != 64 || s.gamePort != netcode.DefaultGamePort || s.interestRadius != 80 {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
}

// stillGame is a game that admits nobody, for a process that never serves.
type stillGame struct{}

func (stillGame) Join(game.Player) (entity.ID, error) {
	return 0, game.Refuse(protocol.CloseRefused, "no")
}
func (stillGame) Leave(game.Player, game.Leave) {}
func (stillGame) Input(game.Player, game.Input) {}
func (stillGame) Step(*game.Tick)               {}

// TestWriteSchema: --write-schema writes the game's schema as JSON, which reads back to the same
// schema, and exits without serving.
func TestWriteSchema(t *testing.T) {
	schema := &protocol.Schema{Kinds: []protocol.KindSchema{
		{ID: 1, Name: "unit", Parts: protocol.PartPosition, Fields: []protocol.Field{protocol.Uint("hp", 7), protocol.Enum("team", "a", "b")}},
		{ID: 2, Name: "score", Fields: []protocol.Field{protocol.Uint("a", 16)}},
	}}
	spec := Spec{New: func(Setup) (game.Game, *entity.Store, error) {
		st, err := entity.NewStore(entity.Config{Capacity: 8, Schema: schema})
		return stillGame{}, st, err
	}}
	path := filepath.Join(t.TempDir(), "schema.json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Run(ctx, spec, []string{"--write-schema", path, "--game-port", "0", "--admin-port", "0"}, func(string) (string, bool) { return "", false }, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back protocol.Schema
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if back.Hash() != schema.Hash() {
		t.Fatalf("the written schema has hash %016x, the game's %016x:\n%s", back.Hash(), schema.Hash(), b)
	}
}
