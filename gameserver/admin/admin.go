// Package admin serves a game server's admin API (operator -> game server) over HTTP, on its own
// port apart from the game's UDP port:
//
//	PUT  /v1/netcode  install a netcode.ConfigPush as live config (bearer token required)
//	GET  /v1/netcode  the netcode.ConfigStatus running now, with the process's instance id
//	GET  /v1/peers    the connected peers (netcode.PeersResponse)
//	PUT  /v1/allocation   deliver a netcode.Allocation to the game (bearer token required)
//	GET  /v1/lifecycle    the netcode.LifecycleStatus; with ?since=V a long-poll for a change
//	GET  /healthz     200 while the tick loop advances (503 once it has stalled for StallAfter)
//	GET  /readyz      200 once the tick loop has ticked and the first config is installed
//	GET  /metrics     the Prometheus exposition of the Gatherer it was given
//
// Every mutating call needs the bearer token (compared in constant time, never logged); reads are
// open, since probes, Prometheus and a port-forwarded curl use them. A push is resolved with
// netcode.Resolve — validated with the rules the CRD enforces, and defaulted — and the resolved
// config is installed through Runtime at the next
// tick boundary; a refused push leaves the running config untouched. Pushes are serialized and a
// push older than the running generation is refused, so a late or replayed push cannot roll the
// config back.
//
// The package is pure Go: it imports api/netcode and the Prometheus client, never Kubernetes or
// cgo packages, and nothing else of the game server — the tick loop plugs in through Runtime.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
)

// Runtime is the game server's tick loop as the admin API sees it.
type Runtime interface {
	// Apply installs cfg at the next tick boundary and returns once the tick loop runs it. It may
	// refuse cfg with an error (a runtime invariant), keeping the old config; a
	// *netcode.ValidationError names the refused field. If ctx ends before the tick loop takes
	// cfg, Apply returns ctx.Err() and cfg is not installed.
	Apply(ctx context.Context, cfg netcode.Resolved) error
	// Peers appends the connected peers to dst and returns it.
	Peers(dst []netcode.PeerInfo) []netcode.PeerInfo
	// Tick returns the number of ticks run so far.
	Tick() uint64
}

// ConnectKeyRuntime is a Runtime that checks connect tokens: the admin API serves
// netcode.PathConnectKeys only for one.
type ConnectKeyRuntime interface {
	// SetConnectKeys installs the keys (the signing key first) and the address tokens must name,
	// between two ticks; it refuses an invalid set whole.
	SetConnectKeys(ctx context.Context, keys []connecttoken.Key, server netip.AddrPort) error
	// ConnectKeys returns the ids of the keys installed and the address tokens must name.
	ConnectKeys(ctx context.Context) ([]uint32, netip.AddrPort, error)
}

// Lifecycle is the process's lifecycle as the admin API sees it (gameserver/lifecycle).
type Lifecycle interface {
	// Status returns the lifecycle now; Wait returns it once its version differs from since, or
	// when ctx ends.
	Status() netcode.LifecycleStatus
	Wait(ctx context.Context, since uint64) netcode.LifecycleStatus
	// Allocate hands a validated allocation to the game and returns once the game has seen it,
	// reporting whether it was new. It returns ctx's error if the game did not take it in time,
	// netcode.ErrAllocationEnded for an allocation whose match is over, and another error when
	// the process cannot take an allocation (it has shut down).
	Allocate(ctx context.Context, a netcode.Allocation) (bool, error)
}

// Options configure a Server.
type Options struct {
	// Token is the bearer token of mutating calls (the process reads it from
	// NETFLEET_ADMIN_TOKEN). Required.
	Token string
	// Initial is the config the Runtime starts with; it runs as generation 0 until the first
	// push.
	Initial netcode.Resolved
	// Gatherer is served on /metrics; nil serves no /metrics.
	Gatherer prometheus.Gatherer
	// Logger gets one record per push; nil discards them. The token is never logged.
	Logger *slog.Logger
	// ReadyWithoutPush makes /readyz pass on the initial config, before any push: for a server
	// run without the operator. By default a server is ready only once a pushed config runs, so a
	// ready server always runs the config its GameServer asks for.
	ReadyWithoutPush bool
	// ApplyTimeout bounds how long a push (or an allocation) waits for the tick loop to take it.
	// Default 5s.
	ApplyTimeout time.Duration
	// Lifecycle serves /v1/allocation and /v1/lifecycle; nil serves neither.
	Lifecycle Lifecycle
	// StallAfter is how long the tick loop may go without a tick before /healthz fails and the
	// lifecycle reports the process unhealthy. Default 5s.
	StallAfter time.Duration
}

// Server is the admin API of one game-server process. Create it with New; serve Handler() or
// call Serve.
type Server struct {
	rt        Runtime
	tokenHash [sha256.Size]byte
	gatherer  prometheus.Gatherer
	log       *slog.Logger
	readyInit bool
	timeout   time.Duration
	lc        Lifecycle
	health    tickWatch
	// closing closes when Serve begins to shut down: long-polls answer at once then.
	closing   chan struct{}
	closeOnce sync.Once

	// mu serializes pushes: the generation check and the apply are one step.
	mu sync.Mutex
	// status is the config running now, readable without mu.
	status atomic.Pointer[netcode.ConfigStatus]
}

// New returns the admin API of a process whose tick loop is rt. The process gets a random
// instance id: run one Server per process, so that a restarted process has a new id.
func New(rt Runtime, opts Options) (*Server, error) {
	if rt == nil {
		return nil, errors.New("admin: nil Runtime")
	}
	if opts.Token == "" {
		return nil, errors.New("admin: empty token")
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("admin: instance id: %w", err)
	}
	s := &Server{
		rt:        rt,
		tokenHash: sha256.Sum256([]byte(opts.Token)),
		gatherer:  opts.Gatherer,
		log:       opts.Logger,
		readyInit: opts.ReadyWithoutPush,
		timeout:   opts.ApplyTimeout,
		lc:        opts.Lifecycle,
		health:    tickWatch{stallAfter: opts.StallAfter},
		closing:   make(chan struct{}),
	}
	if s.health.stallAfter <= 0 {
		s.health.stallAfter = 5 * time.Second
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = 5 * time.Second
	}
	s.status.Store(&netcode.ConfigStatus{
		Generation: 0, Hash: opts.Initial.Hash(), InstanceID: hex.EncodeToString(id), Config: opts.Initial.Config(),
	})
	return s, nil
}

// Status returns the config running now.
func (s *Server) Status() netcode.ConfigStatus { return *s.status.Load() }

// InstanceID returns the process's instance id.
func (s *Server) InstanceID() string { return s.status.Load().InstanceID }

// Ready returns nil once the server is ready — the tick loop has ticked and the first config is
// installed (a pushed one, unless ReadyWithoutPush) — else why it is not.
func (s *Server) Ready() error {
	if s.rt.Tick() == 0 {
		return errors.New("the tick loop has not run yet")
	}
	if !s.readyInit && s.status.Load().Generation == 0 {
		return errors.New("waiting for the first config push")
	}
	return nil
}

// Handler returns the admin API's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(netcode.PathNetcode, s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.getNetcode, http.MethodPut: s.putNetcode,
	}))
	mux.HandleFunc(netcode.PathPeers, s.methods(map[string]http.HandlerFunc{http.MethodGet: s.getPeers}))
	if keys, ok := s.rt.(ConnectKeyRuntime); ok {
		mux.HandleFunc(netcode.PathConnectKeys, s.methods(map[string]http.HandlerFunc{
			http.MethodGet: s.getConnectKeys(keys), http.MethodPut: s.putConnectKeys(keys),
		}))
	}
	if s.lc != nil {
		mux.HandleFunc(netcode.PathAllocation, s.methods(map[string]http.HandlerFunc{http.MethodPut: s.putAllocation}))
		mux.HandleFunc(netcode.PathLifecycle, s.methods(map[string]http.HandlerFunc{http.MethodGet: s.getLifecycle}))
	}
	mux.HandleFunc(netcode.PathHealthz, s.methods(map[string]http.HandlerFunc{http.MethodGet: s.healthz}))
	mux.HandleFunc(netcode.PathReadyz, s.methods(map[string]http.HandlerFunc{http.MethodGet: s.readyz}))
	if s.gatherer != nil {
		metrics := promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{})
		mux.HandleFunc(netcode.PathMetrics, s.methods(map[string]http.HandlerFunc{http.MethodGet: metrics.ServeHTTP}))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, netcode.ErrorResponse{Error: "no such path: " + r.URL.Path})
	})
	return mux
}

// Serve serves the admin API on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// A push may wait ApplyTimeout for the tick loop before it answers, and a lifecycle
		// long-poll MaxLifecycleWaitMillis.
		WriteTimeout:   max(s.timeout, netcode.MaxLifecycleWaitMillis*time.Millisecond) + 10*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 16 << 10,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("admin: serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.closeOnce.Do(func() { close(s.closing) })
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("admin: shutdown: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin: serve: %w", err)
	}
	return nil
}

// methods dispatches on the request method and answers 405 for the others. HEAD is served as
// GET.
func (s *Server) methods(byMethod map[string]http.HandlerFunc) http.HandlerFunc {
	allowed := make([]string, 0, len(byMethod)+1)
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut} {
		if _, ok := byMethod[m]; ok || (m == http.MethodHead && byMethod[http.MethodGet] != nil) {
			allowed = append(allowed, m)
		}
	}
	allow := strings.Join(allowed, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		m := r.Method
		if m == http.MethodHead {
			m = http.MethodGet
		}
		h, ok := byMethod[m]
		if !ok {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, netcode.ErrorResponse{Error: "method " + r.Method + " not allowed; allowed: " + allow})
			return
		}
		h(w, r)
	}
}

func (s *Server) getNetcode(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.status.Load())
}

func (s *Server) putNetcode(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="netfleet-admin"`)
		writeError(w, http.StatusUnauthorized, netcode.ErrorResponse{Error: "missing or wrong bearer token"})
		return
	}
	push, code, err := decodePush(w, r)
	if err != nil {
		writeError(w, code, netcode.ErrorResponse{Error: err.Error()})
		return
	}
	if push.Generation < 1 {
		writeError(w, http.StatusUnprocessableEntity, netcode.ErrorResponse{
			Error: fmt.Sprintf("generation must be at least 1, got %d", push.Generation), Field: "generation"})
		return
	}
	cfg, err := netcode.Resolve(push.Config)
	if err != nil {
		s.log.Warn("config push refused", "generation", push.Generation, "field", netcode.FirstField(err), "error", err)
		writeError(w, http.StatusUnprocessableEntity, netcode.ErrorResponse{Error: err.Error(), Field: netcode.FirstField(err)})
		return
	}
	st, code, eresp := s.install(r.Context(), push.Generation, cfg)
	if code != http.StatusOK {
		writeError(w, code, eresp)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// install runs one push under the push lock: the generation check, the apply and the new status
// are one step.
func (s *Server) install(ctx context.Context, gen int64, cfg netcode.Resolved) (*netcode.ConfigStatus, int, netcode.ErrorResponse) {
	hash := cfg.Hash()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.status.Load()
	switch {
	case gen < cur.Generation:
		return nil, http.StatusConflict, netcode.ErrorResponse{
			Error: fmt.Sprintf("generation %d is older than the running generation %d", gen, cur.Generation), Generation: cur.Generation}
	case gen == cur.Generation && hash == cur.Hash:
		return cur, http.StatusOK, netcode.ErrorResponse{}
	case gen == cur.Generation:
		return nil, http.StatusConflict, netcode.ErrorResponse{
			Error: fmt.Sprintf("generation %d already runs a different config", gen), Generation: cur.Generation}
	}
	// A new generation with the running config (e.g. only the Pod template changed) needs no
	// tick-boundary switch: it is the same config under a new number.
	if hash != cur.Hash {
		actx, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.rt.Apply(actx, cfg)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			s.log.Warn("config push not applied: the tick loop did not take it in time", "generation", gen)
			return nil, http.StatusServiceUnavailable, netcode.ErrorResponse{
				Error: "the tick loop did not take the config in time; the old config runs", Generation: cur.Generation}
		}
		if err != nil {
			s.log.Warn("config push refused by the runtime", "generation", gen, "error", err)
			return nil, http.StatusUnprocessableEntity, netcode.ErrorResponse{Error: err.Error(), Field: netcode.FirstField(err)}
		}
	}
	next := &netcode.ConfigStatus{Generation: gen, Hash: hash, InstanceID: cur.InstanceID, Config: cfg.Config()}
	s.status.Store(next)
	s.log.Info("config applied", "generation", gen, "hash", hash, "previousGeneration", cur.Generation)
	return next, http.StatusOK, netcode.ErrorResponse{}
}

// decodePush reads a ConfigPush: at most MaxAdminBodyBytes (413), one JSON object with known
// fields only (400).
func decodePush(w http.ResponseWriter, r *http.Request) (netcode.ConfigPush, int, error) {
	var push netcode.ConfigPush
	code, err := decodeBody(w, r, &push)
	if err != nil {
		return push, code, fmt.Errorf("malformed config push: %w", err)
	}
	return push, code, nil
}

// decodeBody reads one JSON object into v: at most MaxAdminBodyBytes (413), with known fields
// only and nothing after it (400).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	if r.ContentLength > netcode.MaxAdminBodyBytes {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("body of %d bytes exceeds %d", r.ContentLength, netcode.MaxAdminBodyBytes)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, netcode.MaxAdminBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Anything after the object makes the body malformed.
		if extra := dec.Decode(&struct{}{}); !errors.Is(extra, io.EOF) {
			err = errors.New("unexpected data after the JSON object")
			if extra != nil {
				err = extra
			}
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds %d bytes", netcode.MaxAdminBodyBytes)
	case err != nil:
		return http.StatusBadRequest, err
	}
	return http.StatusOK, nil
}

// authorized checks the bearer token in constant time. Both sides are hashed first, so the
// comparison does not even reveal the token's length.
func (s *Server) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) == 1
}

func (s *Server) getPeers(w http.ResponseWriter, _ *http.Request) {
	resp := netcode.PeersResponse{Tick: s.rt.Tick(), Peers: s.rt.Peers(nil)}
	if resp.Peers == nil {
		resp.Peers = []netcode.PeerInfo{}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := s.Healthy(); err != nil {
		writeError(w, http.StatusServiceUnavailable, netcode.ErrorResponse{Error: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.Ready(); err != nil {
		writeError(w, http.StatusServiceUnavailable, netcode.ErrorResponse{Error: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func writeError(w http.ResponseWriter, code int, e netcode.ErrorResponse) {
	writeJSON(w, code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		// The wire types are plain structs of numbers, strings and booleans.
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(raw, '\n'))
}

// getConnectKeys answers the ids of the connect-token keys the server holds and the address
// tokens must name; never a secret.
func (s *Server) getConnectKeys(rt ConnectKeyRuntime) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, err := connectKeysStatus(r.Context(), rt)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, netcode.ErrorResponse{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
}

// putConnectKeys installs a ConnectKeysPush: 401 without the bearer token, 400 for a malformed
// body, 422 naming the field for an invalid key set or address (nothing changes), 503 if the
// tick loop does not take it in time.
func (s *Server) putConnectKeys(rt ConnectKeyRuntime) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="netfleet-admin"`)
			writeError(w, http.StatusUnauthorized, netcode.ErrorResponse{Error: "missing or wrong bearer token"})
			return
		}
		var push netcode.ConnectKeysPush
		if code, err := decodeBody(w, r, &push); err != nil {
			writeError(w, code, netcode.ErrorResponse{Error: "malformed connect keys push: " + err.Error()})
			return
		}
		keys, server, field, err := parseConnectKeys(&push)
		if err == nil {
			if _, err = connecttoken.NewKeys(keys); err != nil {
				field = "keys"
			}
		}
		if err != nil {
			s.log.Warn("connect keys refused", "field", field, "error", err)
			writeError(w, http.StatusUnprocessableEntity, netcode.ErrorResponse{Error: err.Error(), Field: field})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		if err := rt.SetConnectKeys(ctx, keys, server); err != nil {
			writeError(w, http.StatusServiceUnavailable, netcode.ErrorResponse{Error: err.Error()})
			return
		}
		st, err := connectKeysStatus(ctx, rt)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, netcode.ErrorResponse{Error: err.Error()})
			return
		}
		s.log.Info("connect keys installed", "keyIds", st.KeyIDs, "server", st.Server)
		writeJSON(w, http.StatusOK, st)
	}
}

// parseConnectKeys checks a push's shape: 1 to connecttoken.MaxKeys keys of connecttoken.KeyBytes bytes, and
// an address and a port. It names the refused field.
func parseConnectKeys(p *netcode.ConnectKeysPush) ([]connecttoken.Key, netip.AddrPort, string, error) {
	if len(p.Keys) == 0 || len(p.Keys) > connecttoken.MaxKeys {
		return nil, netip.AddrPort{}, "keys", fmt.Errorf("%d keys, want 1 to %d", len(p.Keys), connecttoken.MaxKeys)
	}
	keys := make([]connecttoken.Key, len(p.Keys))
	for i, k := range p.Keys {
		if len(k.Secret) != connecttoken.KeyBytes {
			return nil, netip.AddrPort{}, fmt.Sprintf("keys[%d].secret", i), fmt.Errorf("key %d is %d bytes, want %d", k.ID, len(k.Secret), connecttoken.KeyBytes)
		}
		keys[i] = connecttoken.Key{ID: k.ID, Secret: [connecttoken.KeyBytes]byte(k.Secret)}
	}
	server, err := netip.ParseAddrPort(p.Server)
	if err != nil || server.Port() == 0 {
		return nil, netip.AddrPort{}, "server", fmt.Errorf("server %q is not an IP address and a port", p.Server)
	}
	return keys, server, "", nil
}

func connectKeysStatus(ctx context.Context, rt ConnectKeyRuntime) (netcode.ConnectKeysStatus, error) {
	ids, server, err := rt.ConnectKeys(ctx)
	if err != nil {
		return netcode.ConnectKeysStatus{}, fmt.Errorf("admin: connect keys: %w", err)
	}
	st := netcode.ConnectKeysStatus{KeyIDs: ids}
	if ids == nil {
		st.KeyIDs = []uint32{}
	}
	if server.IsValid() {
		st.Server = server.String()
	}
	return st, nil
}
