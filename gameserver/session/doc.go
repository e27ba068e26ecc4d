// Package session owns the state of one connected peer as the game server's tick loop keeps it:
// its replication state (a snapshot.View), its congestion controller and application-level
// loss estimator, its byte-rate pacer, its two frame slots, its rate class, lag and detail level,
// its inbound budget and inbox, and the counters and statistics that the admin API and the
// metrics read. It also owns the pools every session of a server shares: frames (FramePool) and
// replication state (StatePool, StatePolicy).
//
// It is policy without I/O: a session never touches the network or the clock. The tick loop
// passes the time, the server's load and the transport's link signals in (Now, Link) and a Sender
// out, so every rule is testable with injected inputs. It imports api/netcode and the gameserver
// packages congestion, entity, pacing, protocol and snapshot; it must not import the transport
// (enet), the tick loop (broadcast) or any game.
//
// A slow or hostile client costs itself, never the tick or the other sessions: nothing a session
// holds grows with what its client does, and a session that cannot keep up loses rate, never
// state.
//
// # Per tick
//
// Tick, once per tick for every active session, after the game stepped:
//
//  1. steps the congestion controller once from the link: the application-level loss, the
//     acknowledgement round trip and the delivery count (the LossEstimator fed by the client's
//     ACKs), the transport's RTT and its reliable backlog, and whether the last frame was cut by
//     the controller's bottleneck ceiling;
//  2. sets the pacer's rate to the session's bytes per second scaled by the throttle, held under
//     the controller's bottleneck ceiling if it has one, and refills it;
//  3. closes the session if its client stopped pinging (4001) or abused its inbound budget
//     (1008);
//  4. moves waiting frame bytes to the transport as the pacer admits them;
//  5. asks the rate class and the rate lever (congestion.Controller.ShouldSend) whether the
//     session is due; a tick it is not due defers everything to the next frame, which carries
//     the union of what changed since the client's acknowledged baselines;
//  6. skips a due session that cannot be served (lag, both frame slots taken, no frame in the
//     pool): nothing is gathered for it;
//  7. sizes the frame (budget, below) and builds it; a due tick with nothing to send sends
//     nothing and is not a skip;
//  8. hands the frame to the pacer: a RESET waits for budget (reliable traffic is never dropped),
//     snapshot packets are sent or dropped by the pacer's drop probability. Dropping is safe: an
//     unacknowledged record is sent again.
//
// # Budget
//
// A frame's byte budget is the budget lever applied to budget.snapshotBytesPerTick
// (congestion.Controller.EffectiveBudget), capped by backpressure.frameBytes and by what the
// session's paced rate affords per send — rate * max(sendInterval, rateClass) / tickRate, at
// least one minimal frame — so that a frame is normally admitted whole and the pacer's drops stay
// rare. Under a bottleneck ceiling it is also held to the controller's frame ceiling
// (congestion.Controller.FrameCeilingBytes), however rarely the session is sent: a frame crosses
// the bottleneck at its rate, and a large one would queue behind itself.
//
// # Skip, never queue
//
// A session has two frame slots. The in-flight slot is taken while a frame's bytes wait for the
// pacer, and until the pacer has paid for the bytes already sent (its budget is not negative): at
// the session's rate those bytes are still on their way out. The ready slot holds a frame built
// while the in-flight slot was taken. With both taken, a due session is skipped: nothing is
// gathered for it and nothing about it moves. Frames come from a FramePool shared by all sessions
// under memory.framePoolBudgetBytes; an exhausted pool skips the session too, and never
// allocates.
//
// The next frame after a skip carries the union of everything the session missed. The push log
// the union is replayed from is the entity store's state history together with the session's
// acknowledged baselines: every record is a delta against a state the client acknowledged (or a
// full spawn), so a frame built after any gap brings the client from what it holds to the present
// in one step. Within backpressure.pushLogTicks (8) ticks of skipping, the baselines are still in
// the history and the union is pure deltas; a skip run longer than that ends with a RESET, which
// re-delivers the session's whole view (the runtime refuses a push log longer than the history
// minus the 8 ticks a baseline needs before it is stored).
//
// # Rate classes and stalls
//
// A session is served on every class-th tick: class 1, 2 or 4, phase-shifted by its slot so the
// classes spread over ticks. Two skips in a row move it to the next slower class. A peer can
// declare a class (a spectator, a dashboard) in its connect data (ConnectDataRateClass) or through
// SetRateClass; a class a session was moved to is relaxed one step toward the declared one after
// a second without skips. The first skip after a clean period starts a stall episode; four serves
// in a row end it; a skip in an episode backpressure.closeStalledAfterMs (3 s) old closes the
// session with 1013. An idle tick is a serve, not a skip.
//
// # Acknowledgement-based lag
//
// A frame handed to the transport is no proof of delivery. Clients report the newest tick they
// applied (PING at 4 Hz, and every ACK). A session is lagging when a frame it sent more than
// RTT + backpressure.lagSkipRttAllowanceMs ago is newer than that tick; a lagging session is
// skipped. The reference is a frame the session sent, not the current tick, so being sent less
// never reads as lag, and the lag clears once the client applies what it was sent. A frame lost on
// the way could never be applied, so after another allowance without a send one frame goes out as
// a probe; probes do not end the stall, so a client that never applies again is closed with 1013.
// A client that sends no PING for backpressure.pingTimeoutMs is closed with 4001.
//
// # Detail levels and overload
//
// A session whose frames keep leaving entities out (its byte rate — budget.sessionBytesPerSecond
// or SetBytesPerSecond — cannot carry its view) moves up the detail levels: longer update periods
// for the far band first, then for everything, with a smaller enter budget for spawns, and at the
// last levels the interest radius cut to 75% and to 50% (see levelConfig).
// More than half the frames of a half-second window starved raises the level; two windows without
// a starved frame lower it. A frame cut by the bottleneck ceiling does not count as starved: the
// ceiling is the congestion response to a thin path, and the controller's probes need the
// peer's whole demand to find out whether the path carries more. No level drops state: a client
// converges on the exact state of every entity within the radius in force. When the tick loop
// runs late (Now.Overloaded) every session is served one level lower and declared classes half
// as often; the tick loop recovers with hysteresis.
//
// # Inbound
//
// HandleMessage takes every message the peer sends, charged against its inbound budget (a token
// bucket of ingress.bytesPerSecond, one ingress.windowMs deep). A COMMAND over budget is refused
// whole; ACKs and PINGs, which keep the session alive, are refused only once the bucket is a whole
// window in debt. ingress.abuseWindows adjacent windows with ingress.abuseRefusalsPerWindow
// refusals close the session with 1008. ACKs are applied at once (replication baselines, loss
// estimator), PINGs record the client's last applied tick, COMMANDs wait in the inbox
// (memory.maxPendingBytesPerConnection), each with its sequence and the client's applied tick, for
// the next tick (DrainCommands), when the tick loop hands them to the game. A message that does
// not decode, or that a client may not send, or that is larger than memory.maxInboundMessageBytes,
// is counted and dropped. HandleMessage never panics and allocates nothing for a warm session.
//
// # State pool
//
// Replication state lives in a StatePool under memory.statePoolBudgetBytes, enforced on the
// state in use: a fresh session's base plus StateBytesPerEntity per tracked entity. A new session
// whose base does not fit is refused. When growth exhausts the pool, StatePolicy degrades the
// farthest band of the largest sessions first (detail level 4, then 5), one session at a time with
// time for the despawns to land, and gives the bands back once the pool has room again.
//
// # Watching a session
//
// Stats (current figures), Counters (cumulative counts) and MemoryUsage (bytes held) are plain
// values, read without allocating, so the tick loop can read them for every peer every tick.
package session
