// Package serve runs a netfleet game-server process for a game: the server loop on the game's UDP
// port (gameserver/broadcast), the admin API on its own TCP port (gameserver/admin) with live
// config pushes, peers, health, readiness and Prometheus metrics, and a clean shutdown. A game's
// main is one call:
//
//	func main() { serve.Main(serve.Spec{Name: "arena", Flags: registerFlags, New: newGame}) }
//
// Settings come from flags, then the environment the operator sets in the pod
// (NETFLEET_GAME_PORT, NETFLEET_ADMIN_PORT, NETFLEET_BIND_ADDRESS, NETFLEET_ADMIN_TOKEN,
// NETFLEET_NETCODE_CONFIG), then defaults; a flag overrides its variable. The game adds flags of
// its own (Spec.Flags). The admin token is read from the environment only, so it never shows in a
// process listing, and it is never logged. On SIGTERM or SIGINT every client is disconnected with
// 1001, the admin API shuts down, and the process exits 0.
//
// The engine flags:
//
//	--bind ADDR              IPv4 address of both ports (NETFLEET_BIND_ADDRESS; 0.0.0.0)
//	--game-port N            UDP port of the game (NETFLEET_GAME_PORT; 7777; 0 picks one)
//	--admin-port N           TCP port of the admin API (NETFLEET_ADMIN_PORT; 8080; 0 picks one)
//	--netcode-config JSON    initial netcode config, or @file (NETFLEET_NETCODE_CONFIG)
//	--interest-radius M      full-detail interest radius in meters (Spec.InterestRadius; 250)
//	--max-peers N            peer slots (256)
//	--ready-without-push     ready on the initial config, without waiting for the operator
//	--shutdown-grace D       how long clients have to acknowledge their disconnect (2s)
//	--log-level L            debug, info, warn or error (info)
//	--write-schema FILE      write the game's schema as JSON to FILE ("-": standard output) and
//	                         exit: the declaration clients in other languages load
//	                         (docs/protocol.md)
package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/admin"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/lifecycle"
	"github.com/netfleet/netfleet/gameserver/metrics"
)

// Spec describes the game a process runs.
type Spec struct {
	// Name is the command's name in usage and error messages.
	Name string
	// Flags, if set, registers the game's own flags; they are parsed with the engine's.
	Flags func(fs *flag.FlagSet)
	// New builds the game once the flags are parsed: the game, and the entity store it writes.
	New func(s Setup) (game.Game, *entity.Store, error)
	// InterestRadius is the default of --interest-radius, in meters; 0 means 250.
	InterestRadius float32
}

// Setup is what New is told of the process.
type Setup struct {
	// MaxPeers is the number of peer slots: at most this many players connect at once.
	MaxPeers int
	// Logger is the process's logger.
	Logger *slog.Logger
	// Lifecycle is the handle the game drives its own state with (Ready, Reserve, Shutdown,
	// SetCapacity, SetCounter). A game that implements game.Allocatable also learns its
	// allocations. After Shutdown the process keeps serving its admin API until its Pod is
	// deleted (a Fleet replaces it), so the operator sees the state.
	Lifecycle game.Lifecycle
}

// Main runs the process until SIGTERM or SIGINT, with os.Args and the environment, and exits 1
// with the error if it fails.
func Main(spec Spec) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := Run(ctx, spec, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", spec.name(), err)
		os.Exit(1)
	}
}

func (s Spec) name() string {
	if s.Name == "" {
		return "gameserver"
	}
	return s.Name
}

// settings are the process's settings after flags and environment are merged.
type settings struct {
	bind                netip.Addr
	gamePort, adminPort int
	token               string
	netcode             netcode.Resolved
	maxPeers            int
	interestRadius      float32
	readyWithoutPush    bool
	logLevel            slog.Level
	shutdownGrace       time.Duration
	tokenGenerated      bool
	writeSchema         string
}

// parse merges flags over the environment over defaults.
func parse(spec Spec, args []string, getenv func(string) (string, bool), stderr io.Writer) (settings, error) {
	fs := flag.NewFlagSet(spec.name(), flag.ContinueOnError)
	fs.SetOutput(stderr)
	envInt := func(name string, def int) int {
		if v, ok := getenv(name); ok && v != "" {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
		return def
	}
	envStr := func(name, def string) string {
		if v, ok := getenv(name); ok && v != "" {
			return v
		}
		return def
	}
	radius := float64(spec.InterestRadius)
	if radius == 0 {
		radius = 250
	}
	var (
		s                      settings
		bind, netcodeJSON, lvl string
	)
	fs.StringVar(&bind, "bind", envStr(netcode.EnvBindAddress, "0.0.0.0"), "IPv4 address to bind both ports to (env "+netcode.EnvBindAddress+")")
	fs.IntVar(&s.gamePort, "game-port", envInt(netcode.EnvGamePort, netcode.DefaultGamePort), "UDP port of the game (env "+netcode.EnvGamePort+"); 0 picks one")
	fs.IntVar(&s.adminPort, "admin-port", envInt(netcode.EnvAdminPort, netcode.DefaultAdminPort), "TCP port of the admin API (env "+netcode.EnvAdminPort+"); 0 picks one")
	fs.StringVar(&netcodeJSON, "netcode-config", envStr(netcode.EnvInitialConfig, ""), "initial netcode config as JSON, or @file (env "+netcode.EnvInitialConfig+"); absent fields take their defaults")
	fs.Float64Var(&radius, "interest-radius", radius, "full-detail interest radius around each player's entity, meters")
	fs.IntVar(&s.maxPeers, "max-peers", 256, "peer slots")
	fs.BoolVar(&s.readyWithoutPush, "ready-without-push", false, "report ready on the initial config, without waiting for the operator's first push")
	fs.DurationVar(&s.shutdownGrace, "shutdown-grace", 2*time.Second, "how long to wait for clients to acknowledge their disconnect on shutdown")
	fs.StringVar(&lvl, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&s.writeSchema, "write-schema", "", "write the game's schema as JSON to this file (-: standard output) and exit")
	if spec.Flags != nil {
		spec.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	addr, err := netip.ParseAddr(bind)
	if err != nil || !addr.Unmap().Is4() {
		return s, fmt.Errorf("--bind %q: not an IPv4 address", bind)
	}
	s.bind = addr.Unmap()
	for name, p := range map[string]int{"--game-port": s.gamePort, "--admin-port": s.adminPort} {
		if p < 0 || p > 65535 {
			return s, fmt.Errorf("%s %d: not a port", name, p)
		}
	}
	if !(radius > 0 && radius <= 2*entity.MaxHalfExtent) {
		return s, fmt.Errorf("--interest-radius %v: not in (0, %d]", radius, 2*entity.MaxHalfExtent)
	}
	s.interestRadius = float32(radius)
	if err := s.logLevel.UnmarshalText([]byte(lvl)); err != nil {
		return s, fmt.Errorf("--log-level: %w", err)
	}
	var raw netcode.NetcodeConfig
	if netcodeJSON != "" {
		if raw, err = loadNetcode(netcodeJSON); err != nil {
			return s, fmt.Errorf("--netcode-config: %w", err)
		}
	}
	if s.netcode, err = netcode.Resolve(raw); err != nil {
		return s, fmt.Errorf("--netcode-config: %w", err)
	}
	s.token, _ = getenv(netcode.EnvAdminToken)
	if s.token == "" {
		// Without a token no push could ever be authorized; a random one keeps the API closed.
		id := make([]byte, 32)
		if _, err := rand.Read(id); err != nil {
			return s, fmt.Errorf("generate admin token: %w", err)
		}
		s.token, s.tokenGenerated = hex.EncodeToString(id), true
	}
	return s, nil
}

// loadNetcode decodes a NetcodeConfig from JSON, or from the file named after an @.
func loadNetcode(v string) (netcode.NetcodeConfig, error) {
	var c netcode.NetcodeConfig
	raw := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if raw, err = os.ReadFile(path); err != nil {
			return c, err
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("decode: %w", err)
	}
	return c, nil
}

// writeSchema writes the store's schema as JSON to path, or to standard output for "-".
func writeSchema(path string, store *entity.Store) error {
	b, err := json.MarshalIndent(store.Layout().Schema(), "", "  ")
	if err != nil {
		return fmt.Errorf("--write-schema: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
	} else {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("--write-schema: %w", err)
	}
	return nil
}

// Run serves spec's game until ctx ends, then shuts down cleanly. args are the command-line
// arguments without the program name, getenv reads the environment, and stderr takes usage and
// the JSON log.
func Run(ctx context.Context, spec Spec, args []string, getenv func(string) (string, bool), stderr io.Writer) error {
	if spec.New == nil {
		return errors.New("serve: Spec.New is required")
	}
	s, err := parse(spec, args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: s.logLevel}))
	if s.tokenGenerated {
		log.Warn("no admin token in the environment; config pushes cannot be authorized", "variable", netcode.EnvAdminToken)
	}
	lc := lifecycle.New()
	g, store, err := spec.New(Setup{MaxPeers: s.maxPeers, Logger: log, Lifecycle: lc})
	if err != nil {
		return fmt.Errorf("start the game: %w", err)
	}
	if s.writeSchema != "" {
		return writeSchema(s.writeSchema, store)
	}

	reg := prometheus.NewRegistry()
	// The admin server serves the registry, so no scrape reads srv before it is set.
	var srv *admin.Server
	m := metrics.New(metrics.Options{Slots: s.maxPeers, Status: func() netcode.ConfigStatus { return srv.Status() }})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m)

	b, err := broadcast.New(broadcast.Options{
		Address:        netip.AddrPortFrom(s.bind, uint16(s.gamePort)),
		MaxPeers:       s.maxPeers,
		Game:           g,
		Store:          store,
		InterestRadius: s.interestRadius,
		Netcode:        s.netcode,
		Logger:         log,
		OnTick:         m.ObserveTick,
		OnSecond:       m.ObserveSecond,
		OnPeerEnd:      m.ObservePeerEnd,
		Lifecycle:      lc,
	})
	if err != nil {
		return err
	}
	srv, err = admin.New(b, admin.Options{
		Token: s.token, Initial: s.netcode, Gatherer: reg, Logger: log, ReadyWithoutPush: s.readyWithoutPush,
		Lifecycle: lc,
	})
	if err != nil {
		return errors.Join(err, b.Stop(context.Background()))
	}
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(s.bind, uint16(s.adminPort)).String())
	if err != nil {
		return errors.Join(fmt.Errorf("admin listener: %w", err), b.Stop(context.Background()))
	}
	log.Info("admin API listening", "address", ln.Addr().String(), "instanceID", srv.InstanceID())

	runErr := make(chan error, 1)
	go func() { runErr <- b.Run() }()
	adminCtx, stopAdmin := context.WithCancel(context.Background())
	adminErr := make(chan error, 1)
	go func() { adminErr <- srv.Serve(adminCtx, ln) }()

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-runErr:
		stopAdmin()
		return errors.Join(err, <-adminErr)
	case err := <-adminErr:
		stopCtx, cancel := context.WithTimeout(context.Background(), s.shutdownGrace)
		defer cancel()
		stopAdmin()
		return errors.Join(err, b.Stop(stopCtx), <-runErr)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), s.shutdownGrace)
	defer cancel()
	stopErr := b.Stop(stopCtx)
	stopAdmin()
	return errors.Join(stopErr, <-runErr, <-adminErr)
}
