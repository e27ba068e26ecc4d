// Package snapshot owns per-session replication state and builds each session's SNAPSHOT
// packets: interest (entities near the session's avatar), per-entity priority accumulators,
// packet filling under a byte budget, client-acknowledged delta baselines, and the ring of sent
// packets that acknowledgements resolve against.
//
// It imports gameserver/world (the entities), gameserver/protocol (the encoding) and api/netcode
// (the budget settings); it does no I/O and knows nothing of the transport, so a tick loop
// decides when to build a session's frame and where its bytes go.
//
// # Per tick
//
// For each session the tick loop picks a byte budget (the congestion controller's budget lever)
// and calls BuildFrame, which:
//
//  1. queries the world for entities within InterestRadius of the session's focus entity (its
//     avatar); an entity keeps its place until it is 10% beyond the radius, so entities on the
//     edge do not flicker in and out;
//  2. grows the priority of every entity that has something to send: a spawn (the entity is new
//     to the session), a despawn (it left interest or the world), or a state that differs from
//     the session's acknowledged baseline. Relevance falls with distance from 1 at the focus to
//     0.25 at the radius; new entities start at SpawnPriority so they go first; game-logic
//     bumps (world.Bump) add. An entity whose state equals its acknowledged baseline has
//     nothing to send: it costs no bytes and its priority stays at zero;
//  3. orders the candidates by priority with a counting sort over logarithmic buckets (four
//     per octave), linear in the number of candidates;
//  4. fills packets of at most MaxPacketBytes, highest priority first, until the budget is
//     spent. A record is never split and every packet applies on its own. A sent entity's
//     priority drops to zero.
//
// # Baselines and acknowledgements
//
// Each packet's records are remembered as (entity, tick) in a fixed ring; the states themselves
// come from the world's state history. When the client acknowledges a packet (HandleAck), each
// entity in it whose recorded tick is newer than its baseline gets that state as its new
// baseline. Deltas name the baseline's tick, so a client resolves them from its own history;
// when the baseline is older than MaxBaselineAge or more than HistoryDepth-2 newer states of the
// entity were sent since (the client may have evicted it), a spawn (full state) is sent instead.
// A spawn or despawn that is not acknowledged, and a state that is not acknowledged, is sent
// again after about one round trip even if nothing changed, so despawns and final resting
// states arrive without a reliable channel.
//
// A client that cannot resolve a delta lists the entity in its ACK (NeedFull); the session
// drops that entity's baseline, ignores acknowledgements of packets already in flight for it,
// and sends a spawn.
//
// # Skips and resets
//
// Because every delta is against acknowledged state, a session that is not built for some ticks
// (rate lever, backpressure) needs no catch-up log: its next frame carries the union of what
// changed. Reset forgets everything the client holds; the next frame starts with a RESET
// message (to be sent reliably) and carries full state, its packets flagged FlagReset.
//
// A Session is not safe for concurrent use. Different sessions of one world may be built
// concurrently while the world is not being stepped.
package snapshot
