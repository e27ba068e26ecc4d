package serve

import (
	"flag"
	"io"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
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
