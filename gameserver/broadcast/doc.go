// Package broadcast is the game server's loop: it owns the ENet host, runs a game (game.Game) on
// its entity store (entity.Store), and keeps one session per peer slot, tying them together at
// the tick rate (netcode tickRateHz, 60 by default). It is the engine a game runs on: the game
// owns its simulation, the loop owns the tick, the transport, replication and every budget.
//
// Between two ticks the loop services ENet, waiting in ENet for the time left until the next
// tick (it never spins). A connection whose HELLO names the store's schema is the game's Join; a
// disconnection, or a session the loop closes, the game's Leave. Each tick then:
//
//  1. serves calls from other goroutines (Apply, Peers, PeerStats), so config changes land
//     between two ticks;
//  2. hands the COMMANDs queued by each session to the game's Input, in order;
//  3. advances the store, runs the game's Step, and commits the store;
//  4. disconnects the players the Step kicked, then runs every session (session.Session.Tick):
//     congestion step from the link signals, rate lever, budget lever, frame build, pacer, ENet
//     send;
//  5. flushes the host once.
//
// The game's methods are always called on the tick goroutine, one at a time; so is every use of
// the store (the game's own and replication's).
//
// # Construction and use
//
//	g := mygame.New(store)  // a game.Game writing store
//	b, err := broadcast.New(broadcast.Options{Address: addr, Game: g, Store: store, Netcode: cfg})
//	go b.Run()              // the tick loop, until Stop
//	...
//	b.Peers(nil)            // per-peer rate, loss, RTT, throttle, bytes, state (admin API)
//	b.PeerStats(nil)        // every session's Stats, Counters and MemoryUsage (metrics, load tools)
//	b.Apply(ctx, newCfg)    // live config (a netcode.Resolved), installed at a tick boundary
//	b.SetPeerBudget(ctx, slot, bytesPerSecond) // one peer's byte rate
//	b.SetPeerRateClass(ctx, slot, 4)           // one peer's declared rate class
//	b.Stop(ctx)             // 1001 to every peer, wait briefly for acknowledgements, destroy the host
//
// A game's process is simplest started with gameserver/serve, which adds the admin API, metrics
// and signal handling around a Broadcaster.
//
// Broadcaster implements admin.Runtime. Three hooks run on the tick goroutine, for metrics:
// Options.OnTick after every tick (its duration, lateness, peer count, overload), Options.OnSecond
// once a second (every peer's Stats, Counters and MemoryUsage, the pools, the transport's
// counters), Options.OnPeerEnd when a session ends (its last figures and close code).
//
// # Client contract
//
// docs/protocol.md specifies what a client does. A client connects with Channels (2) channels and
// sends a HELLO naming its schema's hash first: the peer waits, holding no session, until its
// HELLO arrives; one that sends none within HelloTimeout, or a malformed one, is refused with
// protocol.CloseHandshake (4002), and one naming another schema than the store's with
// protocol.CloseSchema (4004), before it is sent any record. Only then is the player the game's
// Join. The server sends SNAPSHOT packets unreliably on ChannelSnapshot and RESET messages
// reliably on ChannelReliable; before it refuses a client it sends a CLOSE saying why, reliably.
// Clients send ACKs (one per batch of received packets) and PINGs (4 Hz) unreliably; COMMANDs go
// reliably or not, as the game needs. The server accepts every message on any channel. A client
// may declare a rate class in its connect data (session.ConnectDataRateClass). The server closes
// a session with ENet disconnect data: protocol.CloseGoingAway (1001) when it shuts down, protocol.CloseAbuse (1008) when the
// client keeps sending over its inbound budget, protocol.CloseStalled (1013) when the session
// stayed stalled — and, as "try again later", when the pools have no room for a new connection —
// and protocol.CloseNoPing (4001) when the client stopped pinging. A player the game refuses is
// disconnected with the refusal's code (game.CloseCode: 4003 or the game's own), one the game
// answers with an entity that does not exist with protocol.CloseGameError (1011), and one a Step
// kicks with the code the game chose. COMMAND payloads are the game's own input, opaque to the
// loop.
//
// ENet pings every peer every PingInterval (250 ms) so its RTT stays fresh whatever the snapshot
// cadence, and ENet's own unreliable throttle is pinned open: the congestion controller and the
// pacer decide what is sent, not ENet's RTT-jitter heuristic.
//
// # Load and memory
//
// The loop enters overload mode when its ticks run late (work over 90% of the period, or a start
// more than a period late, three ticks in a row) and leaves it after a second of calm ticks (work
// under half the period): in overload every session is served a detail level lower and declared
// rate classes half as often. Every peer's frames come from one frame pool, its replication state
// from one state pool and its inbox from the ingress pool (memory.*PoolBudgetBytes); a connection
// that does not fit is refused with 1013. The per-source connect limiter of the transport is set
// from ingress.connectsPerSecondPerHost and ingress.connectBurstPerHost; attempts over it never
// cost a peer slot and are counted (Second.ConnectRefusals).
//
// What one peer can make the server hold on receive is at most
//
//	memory.maxPendingBytesPerConnection            its inbox of COMMANDs (Go memory)
//	+ memory.maxParkedBytesPerConnection + L       ENet's waiting data: ENet refuses a packet
//	                                               once a peer's waiting data reaches the limit,
//	                                               so one packet of at most L can overshoot it
//	+ L                                            the one packet being handed to the session
//
// of payload, where L = max(memory.maxInboundMessageBytes, 1380) is the transport's packet limit
// (ENet applies one limit to both directions, and snapshot packets reach 1380 bytes); a message
// over memory.maxInboundMessageBytes is dropped by the session. With the defaults that is
// 16384 + 262144 + 2 * 1380 = 281288 bytes.
//
// # Live reconfiguration
//
// Apply validates a config with the netcode rules and this server's own invariants (Validate) and
// installs it between two ticks, returning once it runs; a refused config keeps the running one.
// The invariants: ENet cannot change its packet-size and waiting-data limits on a live host, so a
// config that raises memory.maxInboundMessageBytes above the transport's limit or changes
// memory.maxParkedBytesPerConnection is refused; the push log must fit the store's state history
// (backpressure.pushLogTicks at most HistoryTicks - 8); the state pool must hold one session's
// base state and the ingress pool one session's inbox. Each refusal names the field.
//
// The loop keeps its OS thread (ENet hosts are single-threaded and every tick makes cgo calls),
// so TickStats can report the CPU time of each tick apart from the time a busy machine makes it
// wait.
//
// It imports the transport (enet), the game contract (game), the entity store (entity), and the
// session, snapshot and protocol packages; it must not import the admin API or the metrics (they
// plug in through Runtime and the hooks), nor any game.
package broadcast
