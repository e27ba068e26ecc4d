package broadcast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/lifecycle"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/session"
	"github.com/netfleet/netfleet/gameserver/snapshot"
)

// Transport constants.
const (
	// ChannelSnapshot carries SNAPSHOT packets, unreliable and sequenced.
	ChannelSnapshot = 0
	// ChannelReliable carries RESET messages, reliable and ordered.
	ChannelReliable = 1
	// Channels is the channel count of the server's host; clients connect with as many.
	Channels = 2

	// PingInterval is how often ENet pings each peer, which keeps its RTT fresh whatever the
	// snapshot cadence.
	PingInterval = 250 * time.Millisecond

	// enetDefaultRTT is what ENet reports before a peer's first acknowledgement, with a zero
	// variance, which no measured RTT has; it is not fed to the controller.
	enetDefaultRTT = 500 * time.Millisecond

	// enetThrottleInterval is ENet's default throttle interval, kept when its unreliable throttle
	// is pinned open.
	enetThrottleInterval = 5 * time.Second

	// maxTransportPacketBytes is the transport's packet-size limit: ENet applies one limit to
	// both directions, and every snapshot packet (at most the largest budget.maxPacketBytes the
	// config allows) must fit it. Inbound messages are held to memory.maxInboundMessageBytes by
	// the session.
	maxTransportPacketBytes = 1380

	// shutdownWait bounds how long Stop waits for peers to acknowledge their disconnect when its
	// context has no earlier deadline.
	shutdownWait = 2 * time.Second

	// HelloTimeout is how long a connected peer has to send its HELLO before it is disconnected
	// with protocol.CloseHandshake.
	HelloTimeout = 2 * time.Second
)

// Options configure a Broadcaster.
type Options struct {
	// Address is the UDP address of the game port; port 0 picks a free port (see Address).
	Address netip.AddrPort
	// MaxPeers is the number of peer slots. Default 256.
	MaxPeers int
	// Game is the game the server runs, and Store the entity store it writes. Both are owned by
	// the tick loop from New on: the game's methods are called on it, and nothing else may touch
	// the store.
	Game  game.Game
	Store *entity.Store
	// InterestRadius is the full-detail interest radius in meters. Default 250.
	InterestRadius float32
	// Netcode is the config the server starts with; the zero value is the default config.
	Netcode netcode.Resolved
	// ConnectTokens, if set, holds the connect-token keys, the server's published address and
	// its allocation from the start, for a server run without the operator (which delivers the
	// keys with SetConnectKeys, and the allocations through the Lifecycle). A Netcode whose
	// connectTokens.mode is not Disabled needs keys.
	ConnectTokens *ConnectTokens
	// Logger receives lifecycle records; per-peer events are logged at debug level. nil
	// discards them.
	Logger *slog.Logger
	// OnTick, if set, is called on the tick goroutine after every tick. It must not block, and
	// should not allocate, since it runs on the hot path.
	OnTick func(TickStats)
	// OnSecond, if set, is called on the tick goroutine once a second with every peer's figures
	// and the server's pools and transport counters. It must not block or keep the slice.
	OnSecond func(Second)
	// OnPeerEnd, if set, is called on the tick goroutine when a session ends, with its last
	// figures, so per-peer series can be dropped. It must not block.
	OnPeerEnd func(PeerEnd)
	// Lifecycle, if set, is the process's lifecycle: the server loop reports the connected
	// players to it and delivers its allocations to the game (game.Allocatable) on the tick
	// goroutine.
	Lifecycle *lifecycle.Lifecycle
}

// TickStats describe one tick.
type TickStats struct {
	// Tick is the number of ticks run, this one included.
	Tick uint64
	// Work is the time the tick took, from its start to its flush; Late is how far after its
	// deadline it started.
	Work, Late time.Duration
	// CPU is the CPU time the tick's work took on the tick loop's thread, and ServiceCPU the CPU
	// time the loop spent servicing the transport (and serving calls) before it: unlike Work and
	// Late, they do not count time the thread waited for a core on a busy machine.
	CPU, ServiceCPU time.Duration
	// Peers is the number of connected peers.
	Peers int
	// Overloaded reports that the server runs in overload mode (see Overload).
	Overloaded bool
}

// Broadcaster is a game server's tick loop: it owns the ENet host, the game and its entity store,
// and every peer's session. Create it with New, run it with Run on a goroutine of its own, and end it with Stop.
// Apply, Peers, PeerStats and Tick may be called from any goroutine; Apply, Peers and PeerStats
// are served by the tick loop between two ticks.
type Broadcaster struct {
	log    *slog.Logger
	onTick func(TickStats)

	host     *enet.Host
	game     game.Game
	lc       *lifecycle.Lifecycle
	store    *entity.Store
	players  []game.Player // by peer slot, valid while the session is active
	radius   float32
	cfg      netcode.NetcodeConfig // running, defaulted
	scfg     session.Config
	period   time.Duration
	sessions []*session.Session // by peer slot
	peers    []enet.Peer        // by peer slot, valid while the session is active
	connData []uint32           // by peer slot: the data the peer connected with
	// pending holds, by peer slot, the peers that connected and have not sent their HELLO yet:
	// when they connected; zero for none. They hold a slot and nothing else.
	pending   []time.Time
	nPending  int
	hello     protocol.Hello
	schema    uint64 // the store's schema hash, which a HELLO must name
	closeBuf  []byte
	handshake uint64 // peers disconnected for a missing or malformed HELLO
	mismatch  uint64 // peers refused for another schema
	tokens    *connecttoken.Verifier
	hasKeys   atomic.Bool // the verifier holds keys (they are never removed)
	tokenOK   uint64      // tokens admitted
	tokenBad  [connecttoken.NumReasons]uint64
	// matchUIDs are the allocations of the lifecycle's match, at matchVersion of it, that tokens
	// are checked against.
	matchUIDs    []string
	matchVersion uint64
	live         int
	states       *session.StatePool
	policy       session.StatePolicy
	frames       *session.FramePool
	inboxes      int64 // bytes of the active sessions' inboxes, charged to the ingress pool
	load         overload
	ev           enet.Event
	input        func(session.Command) // hands one COMMAND of inputFrom to the game
	inputFrom    int
	kicks        []kick    // players the game kicked in this tick's Step
	gameTick     game.Tick // handed to the game's Step

	reqs        chan request
	stopReq     chan context.Context
	started     chan struct{} // closed once Run serves requests
	done        chan struct{}
	running     atomic.Bool
	ticks       atomic.Uint64
	current     atomic.Pointer[netcode.NetcodeConfig] // b.cfg, for readers off the tick loop
	clock       time.Time                             // monotonic origin of Now.Nanos
	created     transportLimits
	refused     uint64 // peers turned away for want of room
	gameRefused uint64 // peers the game refused
	gameErrors  uint64 // joins the game answered with an entity that does not exist
	obs         observer
}

// kick is a player the game disconnects.
type kick struct {
	slot int
	code uint32
}

// transportLimits are the limits the ENet host was created with; ENet cannot change them live.
type transportLimits struct {
	maxPacket, maxWaiting int
}

// request is work for the tick loop between two ticks.
type request struct {
	fn   func()
	done chan struct{}
}

// New creates the server for opts.Game: the ENet host bound to opts.Address and the pools.
// Nothing runs until Run.
func New(opts Options) (*Broadcaster, error) {
	if opts.Game == nil || opts.Store == nil {
		return nil, errors.New("broadcast: Options.Game and Options.Store are required")
	}
	if opts.MaxPeers == 0 {
		opts.MaxPeers = 256
	}
	if opts.MaxPeers < 1 || opts.MaxPeers > enet.MaxPeers {
		return nil, fmt.Errorf("broadcast: MaxPeers %d not in [1, %d]", opts.MaxPeers, enet.MaxPeers)
	}
	if opts.InterestRadius == 0 {
		opts.InterestRadius = 250
	}
	cfg := opts.Netcode.Config()
	scfg, err := session.NewConfig(opts.Netcode, opts.InterestRadius)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	shared := snapshot.NewShared(opts.Store.Capacity())
	states, err := session.NewStatePool(opts.Store, shared, scfg.Snapshot, cfg.Memory.StatePoolBudgetBytes)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	limits := transportLimits{
		maxPacket:  max(int(cfg.Memory.MaxInboundMessageBytes), maxTransportPacketBytes),
		maxWaiting: int(cfg.Memory.MaxParkedBytesPerConnection),
	}
	host, err := enet.NewHost(enet.Config{
		Address:            opts.Address,
		Peers:              opts.MaxPeers,
		Channels:           Channels,
		MaximumPacketSize:  limits.maxPacket,
		MaximumWaitingData: limits.maxWaiting,
		ConnectRate: enet.ConnectRate{
			PerSecond: float64(cfg.Ingress.ConnectsPerSecondPerHost),
			Burst:     int(cfg.Ingress.ConnectBurstPerHost),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	b := &Broadcaster{
		log:      opts.Logger,
		onTick:   opts.OnTick,
		host:     host,
		game:     opts.Game,
		lc:       opts.Lifecycle,
		store:    opts.Store,
		players:  make([]game.Player, opts.MaxPeers),
		kicks:    make([]kick, 0, opts.MaxPeers),
		radius:   opts.InterestRadius,
		cfg:      cfg,
		scfg:     scfg,
		period:   time.Second / time.Duration(cfg.TickRateHz),
		sessions: make([]*session.Session, opts.MaxPeers),
		peers:    make([]enet.Peer, opts.MaxPeers),
		connData: make([]uint32, opts.MaxPeers),
		pending:  make([]time.Time, opts.MaxPeers),
		schema:   opts.Store.Layout().Hash(),
		states:   states,
		frames:   session.NewFramePool(cfg.Memory.FramePoolBudgetBytes, int(cfg.Backpressure.FrameBytes)),
		reqs:     make(chan request),
		stopReq:  make(chan context.Context),
		started:  make(chan struct{}),
		done:     make(chan struct{}),
		clock:    time.Now(),
		created:  limits,
		obs:      newObserver(opts, opts.MaxPeers),
		tokens:   connecttoken.NewVerifier(0),
	}
	if ct := opts.ConnectTokens; ct != nil {
		if err := b.installTokens(ct); err != nil {
			b.host.Destroy()
			return nil, err
		}
		b.tokens.SetAllocations(ct.Allocation)
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	for i := range b.sessions {
		b.sessions[i] = session.New(scfg, b.frames)
	}
	b.current.Store(cfg.DeepCopy())
	b.input = b.handInput
	if b.lc != nil {
		b.lc.SetDeliver(b.deliverAllocation)
	}
	if err := b.Validate(opts.Netcode); err != nil {
		b.host.Destroy()
		return nil, fmt.Errorf("broadcast: initial config: %w", err)
	}
	return b, nil
}

// Address is the bound UDP address of the game port.
func (b *Broadcaster) Address() netip.AddrPort { return b.host.Address() }

// Tick returns the number of ticks run so far.
func (b *Broadcaster) Tick() uint64 { return b.ticks.Load() }

// Config returns the netcode config running now, defaulted.
func (b *Broadcaster) Config() netcode.NetcodeConfig { return *b.current.Load().DeepCopy() }

// errNotRunning is returned by calls that need the tick loop when it does not run.
var errNotRunning = errors.New("broadcast: the tick loop is not running")

// call runs fn on the tick loop between two ticks and waits for it; a loop that is about to start
// is waited for. It fails with ctx.Err() if ctx ends before the loop takes fn (fn then never
// runs), and with errNotRunning once the loop has stopped.
func (b *Broadcaster) call(ctx context.Context, fn func()) error {
	select {
	case <-b.started:
	case <-b.done:
		return errNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	r := request{fn: fn, done: make(chan struct{})}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.done:
		return errNotRunning
	}
	<-r.done
	return nil
}

// Do runs fn on the tick loop between two ticks and returns once it ran: the way for another
// goroutine to reach the game and its store, which only the tick loop may touch. It fails with
// ctx.Err() if ctx ends before the loop takes fn (fn then never runs), and with an error once the
// loop has stopped. fn must not block.
func (b *Broadcaster) Do(ctx context.Context, fn func()) error { return b.call(ctx, fn) }

// Run runs the tick loop on the calling goroutine until Stop, then disconnects every peer with
// protocol.CloseGoingAway and destroys the host. It returns an error only if the transport
// fails; the host is destroyed either way.
func (b *Broadcaster) Run() error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("broadcast: Run called twice")
	}
	defer close(b.done)
	// ENet hosts are single-threaded and every tick makes cgo calls: the loop keeps its thread,
	// which also makes the thread's CPU clock the loop's own.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	close(b.started)
	b.log.Info("game server running", "address", b.host.Address().String(), "tickRateHz", b.cfg.TickRateHz,
		"peerSlots", len(b.sessions), "entities", b.store.Count())
	next := time.Now()
	cpu0 := threadCPU()
	for {
		next = next.Add(b.period)
		if err := b.serviceUntil(next); err != nil {
			b.shutdown(time.Now())
			return err
		}
		select {
		case ctx := <-b.stopReq:
			deadline := time.Now().Add(shutdownWait)
			if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
				deadline = d
			}
			b.shutdown(deadline)
			return nil
		default:
		}
		cpu1 := threadCPU()
		start := time.Now()
		late := start.Sub(next)
		b.tick(start)
		work := time.Since(start)
		cpu2 := threadCPU()
		b.load.observe(work, late, b.period, int(b.cfg.TickRateHz))
		if b.onTick != nil {
			b.onTick(TickStats{Tick: b.ticks.Load(), Work: work, Late: late, CPU: cpu2 - cpu1, ServiceCPU: cpu1 - cpu0,
				Peers: b.live, Overloaded: b.load.on})
		}
		cpu0 = cpu2
		b.publishSecond(start)
		// A loop that fell more than a tick behind starts afresh rather than running a burst of
		// ticks to catch up.
		if late > b.period {
			next = start
		}
	}
}

// Stop ends the tick loop: every peer is disconnected with protocol.CloseGoingAway, the server
// waits for their acknowledgements until ctx's deadline (at most 2 s), and the host is destroyed.
// It returns once Run has returned; it returns ctx.Err() only if ctx ends before the tick loop
// takes the request. Without a running loop it shuts the host down itself.
func (b *Broadcaster) Stop(ctx context.Context) error {
	if b.running.CompareAndSwap(false, true) {
		// Never ran: nobody else owns the host.
		b.shutdown(time.Now())
		close(b.done)
		return nil
	}
	select {
	case b.stopReq <- ctx:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	// The loop's shutdown is bounded by the deadline it was given.
	<-b.done
	return nil
}

// serviceUntil services the host until deadline, handling each event, and serves requests. It
// never spins: it waits in ENet for the remaining time and sleeps through a final fraction of a
// millisecond, which ENet's millisecond timeouts cannot express. It always ends by handling what
// has arrived (drain), so a loop that runs late still reads its peers' acknowledgements before
// the tick judges their snapshots: unread, they would count as lost.
func (b *Broadcaster) serviceUntil(deadline time.Time) error {
	for {
		b.serveRequests()
		rem := time.Until(deadline)
		if rem <= 0 {
			return b.drain()
		}
		wait := rem.Truncate(time.Millisecond)
		if wait == 0 {
			time.Sleep(rem)
			return b.drain()
		}
		ok, err := b.host.Service(&b.ev, wait)
		if err != nil {
			return fmt.Errorf("broadcast: %w", err)
		}
		if ok {
			b.handle(&b.ev)
		}
	}
}

// drain handles every event that has arrived, without waiting, for at most a quarter of a tick
// period: a flood cannot hold the tick back for long, and what is left is handled in the next
// service window.
func (b *Broadcaster) drain() error {
	limit := time.Now().Add(b.period / 4)
	for {
		ok, err := b.host.Service(&b.ev, 0)
		if err != nil {
			return fmt.Errorf("broadcast: %w", err)
		}
		if !ok {
			return nil
		}
		b.handle(&b.ev)
		if time.Now().After(limit) {
			return nil
		}
	}
}

// serveRequests runs every request waiting for the loop.
func (b *Broadcaster) serveRequests() {
	for {
		select {
		case r := <-b.reqs:
			r.fn()
			close(r.done)
		default:
			return
		}
	}
}

// now is the time of the current tick as sessions see it.
func (b *Broadcaster) now(t time.Time) session.Now {
	return session.Now{Tick: uint64(b.store.Tick()), UnixMs: t.UnixMilli(), Nanos: int64(t.Sub(b.clock)), Overloaded: b.load.on}
}

// handle processes one ENet event.
func (b *Broadcaster) handle(ev *enet.Event) {
	slot := ev.Peer.Slot()
	if slot < 0 || slot >= len(b.sessions) {
		return
	}
	s := b.sessions[slot]
	switch ev.Type {
	case enet.EventConnect:
		// The session starts once the peer's HELLO names the store's schema.
		b.pending[slot] = time.Now()
		b.nPending++
		b.connData[slot] = ev.Data
	case enet.EventDisconnect:
		if !b.pending[slot].IsZero() {
			b.unpend(slot)
			return
		}
		if s.Active() {
			b.peerEnded(slot, 0)
			b.end(slot, game.Leave{Code: ev.Data})
			b.log.Debug("peer disconnected", "slot", slot, "data", ev.Data)
		}
	case enet.EventReceive:
		switch {
		case s.Active():
			// A malformed, oversized or refused message is counted by the session and dropped.
			_ = s.HandleMessage(ev.Packet.Bytes(), time.Now().UnixMilli())
		case !b.pending[slot].IsZero():
			b.greet(ev.Peer, ev.Packet.Bytes())
		}
	}
}

// greet takes a message from a peer that has not sent its HELLO: a HELLO of the store's schema
// starts its session; one of another schema is refused with protocol.CloseSchema, and a
// malformed one with protocol.CloseHandshake. Anything else (a PING overtaking the HELLO) is
// dropped.
func (b *Broadcaster) greet(p enet.Peer, msg []byte) {
	if t, err := protocol.PeekType(msg); err != nil || t != protocol.MsgHello {
		return
	}
	slot := p.Slot()
	b.unpend(slot)
	switch err := protocol.DecodeHello(msg, &b.hello); {
	case err != nil:
		b.handshake++
		b.refuseWith(p, protocol.CloseHandshake, "malformed HELLO: "+err.Error())
	case b.hello.SchemaHash != b.schema:
		b.mismatch++
		b.refuseWith(p, protocol.CloseSchema, fmt.Sprintf(
			"schema mismatch: the server's schema is %016x, the client's %016x; rebuild the client with the game's schema",
			b.schema, b.hello.SchemaHash))
	default:
		player, ok := b.checkToken(p, b.hello.Token)
		if ok {
			b.connect(p, b.connData[slot], player)
		}
	}
}

// checkToken applies the connect-token mode to a HELLO's token: it returns the token's player id
// and true when the peer may join, and refuses the peer (with the reason's close code) when not.
// Disabled ignores tokens; Optional admits a HELLO without one; Required admits only a valid
// token. The check runs before the peer costs a session.
func (b *Broadcaster) checkToken(p enet.Peer, tok []byte) (string, bool) {
	mode := b.cfg.ConnectTokens.Mode
	if mode == netcode.ConnectTokensDisabled || (mode == netcode.ConnectTokensOptional && len(tok) == 0) {
		return "", true
	}
	if b.lc != nil {
		// The match's allocations, as the lifecycle holds them now: taken again when it changed.
		uids, version := b.lc.Match(b.matchUIDs[:0])
		if version != b.matchVersion {
			b.tokens.SetAllocations(uids...)
			b.matchUIDs, b.matchVersion = uids, version
		}
	}
	player, why := b.tokens.Verify(tok, p.Address(), time.Now())
	if why != connecttoken.OK {
		b.tokenBad[why]++
		b.refuseWith(p, why.CloseCode(), why.Message())
		return "", false
	}
	b.tokenOK++
	return string(player), true
}

// unpend forgets that the peer in slot waits for its HELLO.
func (b *Broadcaster) unpend(slot int) {
	b.pending[slot] = time.Time{}
	b.nPending--
}

// expireHellos disconnects the peers that sent no HELLO within HelloTimeout.
func (b *Broadcaster) expireHellos(now time.Time) {
	if b.nPending == 0 {
		return
	}
	for slot, since := range b.pending {
		if !since.IsZero() && now.Sub(since) > HelloTimeout {
			b.unpend(slot)
			b.handshake++
			b.refuseWith(b.host.Peer(slot), protocol.CloseHandshake, "no HELLO within "+HelloTimeout.String())
		}
	}
}

// connect starts a session for a peer that completed its handshake: replication state and an
// inbox from their pools, the game's join, the link settings. A peer the pools have no room for
// is refused with protocol.CloseStalled (1013, try again later); one the game refuses, with the
// refusal's code (game.CloseCode); one the game answers with an entity that does not exist, with
// protocol.CloseGameError.
func (b *Broadcaster) connect(p enet.Peer, data uint32, playerID string) {
	slot := p.Slot()
	if b.inboxes+int64(b.cfg.Memory.MaxPendingBytesPerConnection) > b.cfg.Memory.IngressPoolBudgetBytes {
		b.refuse(p, protocol.CloseStalled, "the ingress pool is exhausted")
		return
	}
	snap := b.states.Get(b.policy.InUse())
	if snap == nil {
		b.refuse(p, protocol.CloseStalled, "the state pool is exhausted")
		return
	}
	player := game.Player{Slot: slot, Addr: p.Address(), ConnectData: data, PlayerID: playerID}
	focus, err := b.game.Join(player)
	switch {
	case err != nil:
		b.states.Put(snap, b.policy.InUse())
		b.gameRefused++
		b.refuse(p, game.CloseCode(err), game.Reason(err))
		return
	case !b.store.Valid(focus):
		b.states.Put(snap, b.policy.InUse())
		b.gameErrors++
		b.log.Error("the game's Join returned an entity that does not exist in the store; the player is refused",
			"slot", slot, "entity", focus.String())
		b.refuse(p, protocol.CloseGameError, "the game returned a nonexistent entity")
		return
	}
	s := b.sessions[slot]
	if err := s.Start(slot, snap, focus, session.DeclaredRateClass(data), b.now(time.Now())); err != nil {
		b.states.Put(snap, b.policy.InUse())
		b.game.Leave(player, game.Leave{ByServer: true, Code: protocol.CloseStalled})
		b.refuse(p, protocol.CloseStalled, err.Error())
		return
	}
	b.players[slot] = player
	p.SetPingInterval(PingInterval)
	// ENet's own unreliable throttle would drop snapshots on RTT jitter; the congestion
	// controller and the pacer decide what is sent, so ENet's is pinned open.
	p.ConfigureThrottle(enetThrottleInterval, 2, 0)
	b.peers[slot], b.connData[slot] = p, data
	b.inboxes += int64(s.MemoryUsage().Inbox)
	b.live++
	if b.lc != nil {
		b.lc.SetPlayers(b.live)
	}
	b.log.Debug("peer connected", "slot", slot, "address", p.Address().String())
}

// refuse turns a connected peer away with code; a refusal for want of room (1013) is counted.
func (b *Broadcaster) refuse(p enet.Peer, code uint32, why string) {
	if code == protocol.CloseStalled {
		b.refused++
	}
	b.refuseWith(p, code, why)
}

// refuseWith sends the peer a CLOSE with code and why, then disconnects it with code once the
// CLOSE is out.
func (b *Broadcaster) refuseWith(p enet.Peer, code uint32, why string) {
	b.log.Debug("peer refused", "slot", p.Slot(), "code", code, "reason", why)
	b.closeBuf = protocol.AppendClose(b.closeBuf[:0], &protocol.Close{Code: code, Reason: why})
	if p.Send(ChannelReliable, b.closeBuf, enet.Reliable) != nil {
		p.Disconnect(code)
		return
	}
	p.DisconnectLater(code)
}

// end stops the session in slot, its state returns to the pools, and the game learns the player
// left.
func (b *Broadcaster) end(slot int, why game.Leave) {
	s := b.sessions[slot]
	b.inboxes -= int64(s.MemoryUsage().Inbox)
	b.states.Put(s.End(), b.policy.InUse())
	b.peers[slot] = enet.Peer{}
	b.live--
	if b.lc != nil {
		b.lc.SetPlayers(b.live)
	}
	player := b.players[slot]
	b.players[slot] = game.Player{}
	b.game.Leave(player, why)
}

// close disconnects the peer in slot with code and ends its session.
func (b *Broadcaster) close(slot int, code uint32) {
	b.peerEnded(slot, code)
	b.peers[slot].Disconnect(code)
	b.end(slot, game.Leave{ByServer: true, Code: code})
	b.log.Debug("peer closed", "slot", slot, "code", code)
}

// tick runs one tick: game input, the game's step between the store's Advance and Commit, every
// session, one flush.
func (b *Broadcaster) tick(start time.Time) {
	for slot, s := range b.sessions {
		if s.Active() {
			b.inputFrom = slot
			s.DrainCommands(b.input)
		}
	}
	b.store.Advance()
	// The tick lives in the Broadcaster: handed to the game's Step, a local would escape.
	b.gameTick = game.NewTick(b.store.Tick(), float32(b.period.Seconds()), b.store, (*tickPlayers)(b))
	b.game.Step(&b.gameTick)
	b.gameTick = game.Tick{}
	b.store.Commit()
	for _, k := range b.kicks {
		if b.sessions[k.slot].Active() {
			b.close(k.slot, k.code)
		}
	}
	b.kicks = b.kicks[:0]
	b.expireHellos(start)
	now := b.now(start)
	for slot, s := range b.sessions {
		if !s.Active() {
			continue
		}
		p := b.peers[slot]
		r := s.Tick(now, linkOf(p), peerSender{p})
		if r.Outcome == session.Close {
			b.close(slot, r.CloseCode)
		}
	}
	b.policy.Step(now.Tick, int(b.cfg.TickRateHz), b.sessions, b.states)
	// Counted before the flush: a client that has this tick's snapshot must find the tick run
	// (readiness, the tick count in /v1/peers).
	b.ticks.Add(1)
	b.host.Flush()
}

// handInput hands one COMMAND of the session being drained to the game.
func (b *Broadcaster) handInput(c session.Command) {
	b.game.Input(b.players[b.inputFrom], game.Input{Seq: c.Seq, Tick: c.Tick, Payload: c.Payload})
}

// tickPlayers is what a game's Step may do to the players (game.Players).
type tickPlayers Broadcaster

// Follow moves the interest of the player in slot to id.
func (tp *tickPlayers) Follow(slot int, id entity.ID) error {
	b := (*Broadcaster)(tp)
	if slot < 0 || slot >= len(b.sessions) || !b.sessions[slot].Active() {
		return fmt.Errorf("%w: slot %d", game.ErrNoPlayer, slot)
	}
	if !b.store.Valid(id) {
		return fmt.Errorf("follow %s: %w", id, entity.ErrNoEntity)
	}
	b.sessions[slot].Follow(id)
	return nil
}

// SetGroups puts the player in slot in groups.
func (tp *tickPlayers) SetGroups(slot int, groups uint64) error {
	b := (*Broadcaster)(tp)
	if slot < 0 || slot >= len(b.sessions) || !b.sessions[slot].Active() {
		return fmt.Errorf("%w: slot %d", game.ErrNoPlayer, slot)
	}
	b.sessions[slot].SetGroups(groups)
	return nil
}

// Kick disconnects the player in slot with code once the step is over.
func (tp *tickPlayers) Kick(slot int, code uint32) error {
	b := (*Broadcaster)(tp)
	if slot < 0 || slot >= len(b.sessions) || !b.sessions[slot].Active() {
		return fmt.Errorf("%w: slot %d", game.ErrNoPlayer, slot)
	}
	b.kicks = append(b.kicks, kick{slot: slot, code: code})
	return nil
}

// linkOf reads a peer's link signals for its session.
func linkOf(p enet.Peer) session.Link {
	ls := p.LinkStats()
	l := session.Link{LossRatio: ls.PacketLoss, ReliableInFlight: ls.ReliableDataInTransit}
	if ls.RTT != enetDefaultRTT || ls.RTTVariance != 0 {
		l.RTTMs = uint32(ls.RTT / time.Millisecond)
	}
	return l
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// peerSender sends a session's messages to its ENet peer. It is a single pointer, so passing it
// as a session.Sender allocates nothing.
type peerSender struct{ p enet.Peer }

func (ps peerSender) SendSnapshot(data []byte) error {
	return ps.p.Send(ChannelSnapshot, data, enet.Unreliable)
}

func (ps peerSender) SendReliable(data []byte) error {
	return ps.p.Send(ChannelReliable, data, enet.Reliable)
}

// shutdown disconnects every peer with CloseGoingAway, services the host until they acknowledged
// or deadline, and destroys the host.
func (b *Broadcaster) shutdown(deadline time.Time) {
	for slot, s := range b.sessions {
		if s.Active() {
			b.close(slot, protocol.CloseGoingAway)
		}
	}
	b.host.Flush()
	for b.host.ConnectedPeers() > 0 {
		rem := time.Until(deadline)
		if rem <= 0 {
			break
		}
		if _, err := b.host.Service(&b.ev, min(rem, 10*time.Millisecond)); err != nil {
			break
		}
	}
	b.ev.Packet.Destroy()
	b.host.Destroy()
	b.log.Info("game server stopped", "ticks", b.ticks.Load())
}
