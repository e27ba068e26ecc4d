// Package entity is the entity store: what replication needs to know of a game's entities, kept
// apart from any simulation. It holds, per entity slot, the incarnation (id, generation), the
// kind, the simulated transform the game last wrote, the quantized state the clients are sent and
// a history of it, a log of spawns, a uniform grid for interest queries, and a bound on how far
// entities have moved (Reach).
//
// A game owns its simulation and writes its entities here: Spawn, Set, Despawn and Bump, from the
// callbacks the server loop calls on its tick goroutine (package game). The server loop owns the
// tick: Advance starts a tick, the game steps, and Commit quantizes what was written, stamps what
// changed, records the tick's states in the history and rebuilds the grid. Replication then reads
// the committed store (Metas, States, History, SpawnedSince, QueryNew, Reach, Bumps), from several
// goroutines if it likes, until the next Advance. A Store is not safe for concurrent writes.
//
// A Store with no game driving it is also the fake that replication tests use: a test puts an
// entity at a point with Spawn or Set, then Advance and Commit make it visible.
//
// # Ids and slots
//
// An ID is a slot in its low 16 bits and the slot's generation above. The slot is the entity's id
// on the wire; its generation changes every time the slot is reused, so a stale ID never names a
// newer entity, and the zero ID names nothing. Freed slots are reused first in, first out, as late
// as possible.
//
// # Changes and the motion bound
//
// An entity's state changes when its quantized transform does; Commit stamps the tick
// (SlotMeta.Changed), and so do a spawn and a despawn. Reach is measured, not declared: each
// Commit adds the largest horizontal distance an entity moved since the last one, so it bounds
// every entity's motion between any two ticks however the game moves them, teleports included.
//
// It imports gameserver/protocol (the quantized State) and nothing else from netfleet; it knows
// nothing of sessions, packets or the network.
package entity
