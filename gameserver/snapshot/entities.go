package snapshot

import (
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Entities is the entity store as replication reads it (entity.Store implements it): read only,
// between the store's Commit and its next Advance, from any number of views at once. A build
// fetches the per-slot tables once, at its start, and indexes them by slot.
type Entities interface {
	// Capacity is the number of slots; HistoryTicks the depth of the state history.
	Capacity() int
	HistoryTicks() int
	// Tick is the store's current tick.
	Tick() uint32
	// Metas, Kinds and States are the per-slot tables: position, liveness, generation and change
	// tick; kind; quantized state.
	Metas() []entity.SlotMeta
	Kinds() []entity.Kind
	States() []protocol.State
	// History is HistoryTicks rows of Capacity states, the row of tick t at t % HistoryTicks.
	History() []protocol.State
	// Bumps are this tick's priority bumps.
	Bumps() []entity.Bump
	// Reach bounds how far entities moved between two calls (entity.Store.Reach).
	Reach() float64
	// SpawnedSince lists the slots spawned at tick or later, if the store's log covers tick.
	SpawnedSince(tick uint32) ([]uint16, bool)
	// QueryNew appends the live entities within radius of (x, y) whose slots are not set in
	// known.
	QueryNew(x, y, radius float32, known []uint8, out []entity.Hit) []entity.Hit
	// Layout is the store's compiled schema; Fields the committed field words, Layout().Stride()
	// a slot, and FieldHistory their history, in rows like History's.
	Layout() *protocol.Layout
	Fields() []uint32
	FieldHistory() []uint32
	// Visibilities are the slots' visibilities, read for the slots whose SlotMeta.Special is
	// set; AlwaysRelevant lists the live slots relevant wherever they are.
	Visibilities() []entity.Visibility
	AlwaysRelevant() []uint16
}
