// Package session owns the state of one connected peer as the game server's tick loop keeps it:
// its replication state (a snapshot.Session), its congestion controller and application-level
// loss estimator, its byte-rate pacer, its two frame slots, its inbox of game input, and the
// counters and statistics that the admin API and the metrics read.
//
// It is policy without I/O: a session never touches the network or the clock. The tick loop
// passes the time and the transport's link signals in (Now, Link) and a Sender out, so every rule
// is testable with injected inputs. It imports api/netcode and the gameserver packages congestion,
// pacing, protocol, snapshot and world; it must not import the transport (enet) or the tick loop
// (broadcast).
//
// # Per tick
//
// Tick, once per tick for every active session, after the world stepped:
//
//  1. steps the congestion controller once from the link: the application-level loss (the
//     LossEstimator fed by the client's ACKs), the transport's RTT and its reliable backlog;
//  2. sets the pacer's rate to the session's bytes per second scaled by the throttle, and
//     refills it;
//  3. moves waiting frame bytes to the transport as the pacer admits them;
//  4. asks the rate lever (congestion.Controller.ShouldSend) whether the session is due; a tick
//     it is not due defers everything to the next frame, which carries the union of what changed
//     since the client's acknowledged baselines;
//  5. sizes the frame (budget, below) and builds it; a due tick with nothing to send sends
//     nothing and is not a skip;
//  6. hands the frame to the pacer: a RESET waits for budget (reliable traffic is never dropped),
//     snapshot packets are sent or dropped by the pacer's drop probability. Dropping is safe: an
//     unacknowledged record is sent again.
//
// # Budget
//
// A frame's byte budget is the budget lever applied to budget.snapshotBytesPerTick
// (congestion.Controller.EffectiveBudget), capped by backpressure.frameBytes and by what the
// session's paced rate affords per send — rate * sendInterval / tickRate, at least one minimal
// frame — so that a frame is normally admitted whole and the pacer's drops stay rare.
//
// # Frame slots
//
// A session has two frame slots. The in-flight slot is taken while a frame's bytes wait for the
// pacer, and until the pacer has paid for the bytes already sent (its budget is not negative):
// at the session's rate those bytes are still on their way out. The ready slot holds a frame built
// while the in-flight slot was taken. With both taken, a due session is skipped: nothing is
// gathered for it and nothing about it moves. Frames come from a FramePool shared by all sessions
// under one byte budget; when it is exhausted the session is skipped as well.
//
// # Inbound
//
// HandleMessage takes every message the peer sends. ACKs are applied at once (replication
// baselines, loss estimator), PINGs record the client's last applied tick, COMMANDs wait in a
// bounded inbox for the next tick (DrainCommands). A message that does not decode, or that a
// client may not send, or that is larger than memory.maxInboundMessageBytes, is counted and
// dropped. HandleMessage never panics and allocates nothing for a warm session.
//
// # Watching a session
//
// Stats (current figures), Counters (cumulative counts) and MemoryUsage (bytes held) are plain
// values, read without allocating, so the tick loop can read them for every peer every tick.
package session
