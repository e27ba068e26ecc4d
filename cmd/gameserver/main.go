// Command gameserver runs one netfleet game server: the ENet broadcaster on the game's UDP port
// (gameserver/broadcast) and the admin API on its own TCP port (gameserver/admin), which serves
// live config pushes, peers, health, readiness and Prometheus metrics.
//
//	NETFLEET_ADMIN_TOKEN=... gameserver --game-port 7777 --admin-port 8080 --world-population 2000
//
// Settings come from flags, then the environment the operator sets (NETFLEET_GAME_PORT,
// NETFLEET_ADMIN_PORT, NETFLEET_BIND_ADDRESS, NETFLEET_ADMIN_TOKEN, NETFLEET_NETCODE_CONFIG), then
// defaults; a flag overrides its variable. The admin token is read from the environment only, so
// it never shows in a process listing, and it is never logged. On SIGTERM or SIGINT every client
// is disconnected with 1001, the admin API shuts down, and the process exits 0.
package main

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
	"github.com/netfleet/netfleet/gameserver/metrics"
	"github.com/netfleet/netfleet/gameserver/world"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gameserver:", err)
		os.Exit(1)
	}
}

// settings are the process's settings after flags and environment are merged.
type settings struct {
	bind                netip.Addr
	gamePort, adminPort int
	token               string
	netcode             netcode.NetcodeConfig
	opts                broadcast.Options
	readyWithoutPush    bool
	logLevel            slog.Level
	shutdownGrace       time.Duration
	tokenGenerated      bool
}

// parse merges flags over the environment over defaults.
func parse(args []string, getenv func(string) (string, bool), stderr io.Writer) (settings, error) {
	fs := flag.NewFlagSet("gameserver", flag.ContinueOnError)
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
	var (
		s                      settings
		bind, netcodeJSON, lvl string
		seed                   uint64
		population, peers      int
		halfExtent, radius     float64
	)
	fs.StringVar(&bind, "bind", envStr(netcode.EnvBindAddress, "0.0.0.0"), "IPv4 address to bind both ports to (env "+netcode.EnvBindAddress+")")
	fs.IntVar(&s.gamePort, "game-port", envInt(netcode.EnvGamePort, netcode.DefaultGamePort), "UDP port of the game (env "+netcode.EnvGamePort+"); 0 picks one")
	fs.IntVar(&s.adminPort, "admin-port", envInt(netcode.EnvAdminPort, netcode.DefaultAdminPort), "TCP port of the admin API (env "+netcode.EnvAdminPort+"); 0 picks one")
	fs.StringVar(&netcodeJSON, "netcode-config", envStr(netcode.EnvInitialConfig, ""), "initial netcode config as JSON, or @file (env "+netcode.EnvInitialConfig+"); absent fields take their defaults")
	fs.Uint64Var(&seed, "world-seed", 1, "seed of the demo world's simulation")
	fs.IntVar(&population, "world-population", 1000, "entities the demo world keeps alive, avatars not counted")
	fs.Float64Var(&halfExtent, "world-half-extent", 2000, "the world spans ±this many meters on X and Y")
	fs.Float64Var(&radius, "interest-radius", 250, "full-detail interest radius around each avatar, meters")
	fs.BoolVar(&s.opts.Frozen, "world-frozen", false, "do not simulate the world: nothing moves but joining avatars (idle-world measurements)")
	fs.IntVar(&peers, "max-peers", 256, "peer slots")
	fs.BoolVar(&s.readyWithoutPush, "ready-without-push", false, "report ready on the initial config, without waiting for the operator's first push")
	fs.DurationVar(&s.shutdownGrace, "shutdown-grace", 2*time.Second, "how long to wait for clients to acknowledge their disconnect on shutdown")
	fs.StringVar(&lvl, "log-level", "info", "debug, info, warn or error")
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
	if err := s.logLevel.UnmarshalText([]byte(lvl)); err != nil {
		return s, fmt.Errorf("--log-level: %w", err)
	}
	if netcodeJSON != "" {
		if s.netcode, err = loadNetcode(netcodeJSON); err != nil {
			return s, fmt.Errorf("--netcode-config: %w", err)
		}
	}
	if err := s.netcode.Validate(); err != nil {
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
	s.opts.Address = netip.AddrPortFrom(s.bind, uint16(s.gamePort))
	s.opts.MaxPeers = peers
	s.opts.InterestRadius = float32(radius)
	s.opts.World = world.Config{Seed: seed, Population: population, HalfExtent: float32(halfExtent)}
	s.opts.Netcode = s.netcode
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

// run serves until ctx ends, then shuts down cleanly.
func run(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer) error {
	s, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: s.logLevel}))
	if s.tokenGenerated {
		log.Warn("no admin token in the environment; config pushes cannot be authorized", "variable", netcode.EnvAdminToken)
	}

	reg := prometheus.NewRegistry()
	// The admin server serves the registry, so no scrape reads srv before it is set.
	var srv *admin.Server
	m := metrics.New(metrics.Options{Slots: s.opts.MaxPeers, Status: func() netcode.ConfigStatus { return srv.Status() }})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m)
	s.opts.Logger = log
	s.opts.OnTick, s.opts.OnSecond, s.opts.OnPeerEnd = m.ObserveTick, m.ObserveSecond, m.ObservePeerEnd

	b, err := broadcast.New(s.opts)
	if err != nil {
		return err
	}
	srv, err = admin.New(b, admin.Options{
		Token: s.token, Initial: s.netcode, Gatherer: reg, Logger: log, ReadyWithoutPush: s.readyWithoutPush,
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
