// Package snapshot is replication: it owns each client's view of the entity store (View) and
// builds the client's SNAPSHOT packets: interest (entities near the entity the client follows,
// its avatar), per-entity priority accumulators, packet filling under a byte budget,
// client-acknowledged delta baselines, and the ring of sent packets that acknowledgements
// resolve against.
//
// It reads the entity store through the Entities interface (entity.Store implements it), once
// per frame, and imports gameserver/entity (the store's types), gameserver/protocol (the encoding)
// and api/netcode (the budget settings); it does no I/O and reads no clock, so a tick loop decides
// when to build a view's frame and where its bytes go.
//
// # Per tick
//
// For each view the tick loop picks a byte budget (the congestion controller's budget lever)
// and calls BuildFrame, which:
//
//  1. finds the entities within InterestRadius of the view's focus entity that it does not track
//     yet and starts tracking them as spawns; a tracked entity leaves only when it is 10% beyond
//     the radius, so entities on the edge do not flicker in and out. A full scan of the store
//     (Entities.QueryNew, given the tracked-slot bitmap) also finds the untracked entities in a
//     band 1/32 of the radius wide beyond it. Until the focus and the store's entities together
//     may have moved that far (Entities.Reach bounds how far entities moved), nothing else can
//     come within the radius, so between scans the view checks only those, the entities it
//     dropped since and those the store spawned since its last frame (Entities.SpawnedSince),
//     however many ticks ago that was: the same entities a scan every tick would find, at the
//     cost of a scan every few dozen ticks;
//  2. finds the newest record of each tracked entity among the packets acknowledged since the
//     last frame;
//  3. in one pass over the tracked entities (each keeps its position in the view's array while
//     tracked; a position freed is reused, and the array is compacted when it is more than half
//     holes) applies those acknowledgements, turns entities that left, died or were replaced
//     into despawns, and grows the priority of every entity with something to send (a spawn, a
//     despawn, or a state that changed since the acknowledged baseline). Relevance falls with
//     distance from 1 at the focus to 0.25 at the radius; entities entering interest start at
//     SpawnPriority (scaled by relevance) so they go first; the game's bumps (entity.Store.Bump)
//     add.
//     An entity that has not changed since its acknowledged baseline has nothing to send: it
//     costs no bytes and its priority stays at zero;
//  4. orders the candidates by priority with a stable counting sort over logarithmic buckets
//     (four per octave), linear in the number of candidates, and prepares their delta records
//     (below) in that order;
//  5. fills packets of at most MaxPacketBytes, highest priority first, until the budget is spent.
//     A record is never split and every packet applies on its own. A sent entity's priority
//     drops to zero.
//
// The pass of step 3 runs for every tracked entity of every view every tick: its common case,
// an entity in interest with an acknowledged baseline, is a loop with no calls, whose values stay
// in registers, and every other case goes to a second loop. The arrays a build fills and forgets
// (candidates, their records, acknowledgements found) are shared by the views of a store, a
// set per build running at once, so that they stay in the CPU's caches from one view to the
// next: a server's views together hold more than the caches, and each view's own state is
// read from main memory once a tick.
//
// # Shared record cache
//
// A delta record depends only on the entity, the tick and the baseline's tick, and views whose
// clients acknowledge at similar round trips hold the same baselines. The views of a store share
// a cache of the current tick's delta records of up to 64 bits (nearly every delta of a moving
// entity), sixteen baseline ages per entity: the first view that needs a record encodes it, the
// others append its bits. The cache, with the scratch arrays above, is a Shared that the server
// loop makes for its store and hands to every view (NewView). It is safe for views built
// concurrently: an entry is claimed with a compare-and-swap, written, and published by storing
// its key, and is not changed again in the tick.
//
// # Baselines and acknowledgements
//
// Each packet's records are remembered as (replica position, send count) in a fixed ring with
// the packet's tick, so an acknowledgement finds its replicas without a lookup; the states
// themselves come from the store's state history, and a baseline is copied into the view only
// once it is at least 8 ticks old and 4 ticks older than the round trip, which happens to
// entities at rest: a moving entity's baseline is replaced about every round trip before that.
// The copy age is at most half the history, so a view can also go unbuilt for half the
// history and keep its baselines. When the client acknowledges a packet (HandleAck), each entity
// in it whose recorded tick is newer than its baseline takes that tick's state as its new
// baseline. Deltas name the baseline's tick, so a
// client resolves them from its own history; when the baseline is older than MaxBaselineAge, or
// HistoryDepth-1 newer states of the entity were sent since (the client may have evicted it), a
// spawn (full state) is sent instead. A record that is not acknowledged within about a round trip
// is sent again even if nothing changed, so spawns, despawns and final resting states arrive
// without a reliable channel.
//
// A client that cannot resolve a delta lists the entity in its ACK (NeedFull); the view drops
// that entity's baseline, ignores acknowledgements of packets already in flight for it, and sends
// a spawn. An ACK with Resync resets the view.
//
// # Skips and resets
//
// Because every delta is against acknowledged state, a view that is not built for some ticks
// (rate lever, backpressure) needs no catch-up log: its next frame carries the union of what
// changed. Reset forgets everything the client holds; the next frame comes with a RESET message
// (to be sent reliably) and carries full state, its packets flagged FlagReset.
//
// A View is not safe for concurrent use. Different views of one store may be built concurrently
// while the store is not being written.
package snapshot
