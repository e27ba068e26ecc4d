// Package broadcast is the game server's tick loop: it owns the ENet host, the demo world and one
// session per peer slot, and ties them together at the tick rate (netcode tickRateHz, 60 by
// default).
//
// Between two ticks the loop services ENet, waiting in ENet for the time left until the next
// tick (it never spins). Each tick then:
//
//  1. serves calls from other goroutines (Apply, Peers, PeerStats), so config changes land
//     between two ticks;
//  2. applies the game input queued by each session (COMMANDs) to the world;
//  3. steps the world;
//  4. runs every session (session.Session.Tick): congestion step from the link signals, rate
//     lever, budget lever, frame build, pacer, ENet send;
//  5. flushes the host once.
//
// # Construction and use
//
//	b, err := broadcast.New(broadcast.Options{Address: addr, World: world.Config{...}, Netcode: cfg})
//	go b.Run()              // the tick loop, until Stop
//	...
//	b.Peers(nil)            // per-peer rate, loss, RTT, throttle, bytes, state (admin API)
//	b.PeerStats(nil)        // every session's Stats, Counters and MemoryUsage (metrics, load tools)
//	b.Apply(ctx, newCfg)    // live config, installed at a tick boundary
//	b.Stop(ctx)             // 1001 to every peer, wait briefly for acknowledgements, destroy the host
//
// Broadcaster implements admin.Runtime. Options.OnTick observes every tick's duration on the tick
// goroutine.
//
// # Client contract
//
// A client connects with Channels (2) channels. The server sends SNAPSHOT packets unreliably on
// ChannelSnapshot and RESET messages reliably on ChannelReliable. Clients send ACKs (one per
// batch of received packets) and PINGs (4 Hz) unreliably; COMMANDs go reliably or not, as the
// game needs. The server accepts every message on any channel. The server closes a session with ENet disconnect data:
// protocol.CloseGoingAway (1001) when it shuts down. The demo world's game input is a move
// (AppendMove): the sender's avatar walks to a point.
//
// ENet pings every peer every PingInterval (250 ms) so its RTT stays fresh whatever the snapshot
// cadence, and ENet's own unreliable throttle is pinned open: the congestion controller and the
// pacer decide what is sent, not ENet's RTT-jitter heuristic.
//
// # Live reconfiguration
//
// Apply validates a config with the netcode rules and this server's own invariants (Validate) and
// installs it between two ticks, returning once it runs; a refused config keeps the running one.
// ENet cannot change its packet-size and waiting-data limits on a live host, so a config that
// raises memory.maxInboundMessageBytes above the transport's limit or changes
// memory.maxParkedBytesPerConnection is refused, naming the field.
//
// It imports the transport (enet), the world, and the session, snapshot and protocol packages; it
// must not import the admin API or the metrics (they plug in through Runtime and OnTick).
package broadcast
