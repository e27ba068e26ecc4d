// Package world owns the game server's demo simulation: entities (id, kind, position, rotation,
// velocity) that wander between waypoints, rest, spawn and despawn; one avatar entity per
// session; a uniform grid for interest queries; per-entity change tracking, a short history of
// quantized states, and per-tick priority bumps from game logic.
//
// The simulation is deterministic for a seed: it has its own random generator and never reads
// the clock. A World is not safe for concurrent use, but once Step has returned its read methods
// (State, Query, ...) may be called from several goroutines until the next Step.
//
// It imports gameserver/protocol (for the quantized State) and nothing else from netfleet; it
// knows nothing of sessions, packets or the network.
package world

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// ID names an entity incarnation: the slot in its low 16 bits, the slot's generation above. A
// slot's generation changes every time the slot is reused, so a stale ID never names a newer
// entity. The zero ID names nothing.
type ID uint32

// Slot is the entity's slot, its id on the wire.
func (id ID) Slot() uint16 { return uint16(id) }

// Gen is the slot generation of the incarnation.
func (id ID) Gen() uint16 { return uint16(id >> 16) }

func makeID(slot, gen uint16) ID { return ID(uint32(gen)<<16 | uint32(slot)) }

// Kind is what an entity is; it is replicated in spawn records.
type Kind uint8

// Entity kinds of the demo.
const (
	KindAvatar Kind = 1 // a session's avatar; walks like a runner
	KindWalker Kind = 2 // slow, on the ground
	KindRunner Kind = 3 // fast, on the ground
	KindDrone  Kind = 4 // fast, flies between altitudes
)

// maxSpeed bounds every kind's speed, in m/s.
const maxSpeed = 9

func (k Kind) speed() float32 {
	switch k {
	case KindWalker:
		return 1.4
	case KindDrone:
		return 9
	}
	return 4.5
}

// ArrivalBump is the priority bump of an entity that reaches its waypoint and comes to rest, so
// its final resting state reaches clients early.
const ArrivalBump = 4

// Config configures a World.
type Config struct {
	// Seed makes the simulation reproducible.
	Seed uint64
	// Capacity is the number of entity slots, avatars included; at most protocol.MaxEntities.
	Capacity int
	// Population is how many non-avatar entities the world keeps alive: each one that despawns
	// is replaced by a new one elsewhere.
	Population int
	// HalfExtent bounds the world: entities stay within ±HalfExtent meters on X and Y. Default
	// 2000, at most protocol.WorldHalfExtent - 1.
	HalfExtent float32
	// CellSize is the edge of a cell of the interest grid, in meters. Default 128.
	CellSize float32
	// HistoryTicks is how many ticks of quantized states StateAt can return; a power of two,
	// default 64.
	HistoryTicks int
	// WanderRadius is how far, in meters, an entity's next waypoint may be. Default 200.
	WanderRadius float32
	// RestMinSec and RestMaxSec bound how long an entity rests at a waypoint, in seconds. A
	// resting entity's state does not change. Both 0: entities never rest.
	RestMinSec, RestMaxSec float32
	// LifetimeMeanSec is the mean lifetime of a non-avatar entity, in seconds; 0 means entities
	// live forever.
	LifetimeMeanSec float32
}

func (c Config) withDefaults() Config {
	if c.HalfExtent == 0 {
		c.HalfExtent = 2000
	}
	if c.CellSize == 0 {
		c.CellSize = 128
	}
	if c.HistoryTicks == 0 {
		c.HistoryTicks = 64
	}
	if c.WanderRadius == 0 {
		c.WanderRadius = 200
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Capacity > 0 && c.Capacity <= protocol.MaxEntities, "world: Capacity %d not in [1, %d]", c.Capacity, protocol.MaxEntities)
	check(c.Population >= 0 && c.Population <= c.Capacity, "world: Population %d not in [0, Capacity %d]", c.Population, c.Capacity)
	check(c.HalfExtent > 0 && c.HalfExtent <= protocol.WorldHalfExtent-1, "world: HalfExtent %v not in (0, %d]", c.HalfExtent, protocol.WorldHalfExtent-1)
	check(c.CellSize >= 1 && c.CellSize <= 2*c.HalfExtent, "world: CellSize %v not in [1, 2*HalfExtent]", c.CellSize)
	check(c.HistoryTicks >= 2 && c.HistoryTicks <= 4096 && c.HistoryTicks&(c.HistoryTicks-1) == 0, "world: HistoryTicks %d is not a power of two in [2, 4096]", c.HistoryTicks)
	check(c.WanderRadius > 0, "world: WanderRadius %v must be positive", c.WanderRadius)
	check(c.RestMinSec >= 0 && c.RestMaxSec >= c.RestMinSec, "world: rest bounds [%v, %v] invalid", c.RestMinSec, c.RestMaxSec)
	check(c.LifetimeMeanSec >= 0, "world: LifetimeMeanSec %v must not be negative", c.LifetimeMeanSec)
	return errors.Join(errs...)
}

// SlotMeta is what replication reads of a slot every tick, packed together in 16 bytes, so a
// pass over a viewer's entities reads one cache line per entity from the world.
type SlotMeta struct {
	X, Y    float32 // simulated horizontal position, as XY returns it
	Changed uint32  // last tick the state changed, or the entity spawned or despawned
	Gen     uint16  // slot generation
	Alive   bool
}

// Dist2 is the squared horizontal distance from the slot's position to (x, y), in m², as interest
// queries measure it.
func (m *SlotMeta) Dist2(x, y float32) float32 {
	dx, dy := m.X-x, m.Y-y
	return dx*dx + dy*dy
}

// Bump raises an entity's replication priority for the tick, e.g. after a collision.
type Bump struct {
	Slot   uint16
	Gen    uint16
	Amount float32
}

// Hit is an entity found by Query.
type Hit struct {
	Slot  uint16
	Dist2 float32 // squared horizontal distance to the query point, m²
}

// World is the simulation. Per-slot data is kept in parallel slices (structure of arrays) so the
// per-tick passes stream through memory.
type World struct {
	cfg  Config
	rng  rng
	tick uint32

	meta       []SlotMeta
	kind       []Kind
	pos        [][3]float32
	target     [][3]float32
	vel        [][3]float32
	remain     []float32 // meters left to the waypoint
	rot        []uint32
	rest       []float32 // seconds left at rest; 0 when moving
	life       []float32 // seconds left to live; +Inf for avatars and immortal entities
	steered    []bool    // walking to a target set by SetTarget
	states     []protocol.State
	hist       []protocol.State // HistoryTicks rows of Capacity states, row = tick % HistoryTicks
	free       []uint16         // FIFO of free slots, so a slot is reused as late as possible
	freeHead   int
	freeLen    int
	population int
	avatars    int
	bumps      []Bump
	kill       []uint16
	grid       grid
	reach      float64 // Reach
	// The spawn log (SpawnedSince): the slots spawned, oldest first, and the tick each spawned
	// at. It holds every spawn at tick bornFrom or later, and nothing older than the history.
	born     []uint16
	bornAt   []uint32
	bornFrom uint32
}

// New creates a world at tick 1 with Population entities placed at random.
func New(cfg Config) (*World, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.Capacity
	w := &World{
		cfg:     cfg,
		rng:     rng{s: cfg.Seed},
		tick:    1,
		meta:    make([]SlotMeta, n),
		kind:    make([]Kind, n),
		pos:     make([][3]float32, n),
		target:  make([][3]float32, n),
		vel:     make([][3]float32, n),
		remain:  make([]float32, n),
		rot:     make([]uint32, n),
		rest:    make([]float32, n),
		life:    make([]float32, n),
		steered: make([]bool, n),
		states:  make([]protocol.State, n),
		hist:    make([]protocol.State, cfg.HistoryTicks*n),
		free:    make([]uint16, n),
		freeLen: n,
		kill:    make([]uint16, 0, n),
		born:    make([]uint16, 0, maxLog*n),
		bornAt:  make([]uint32, 0, maxLog*n),
		bumps:   make([]Bump, 0, 64),
		grid:    newGrid(cfg.HalfExtent, cfg.CellSize, n),
	}
	for i := range w.free {
		w.free[i] = uint16(i)
	}
	for range cfg.Population {
		w.spawn(w.randomKind(), w.randomPoint())
	}
	w.quantize()
	w.grid.rebuild(w.meta, w.pos)
	return w, nil
}

// Config returns the world's configuration with defaults applied.
func (w *World) Config() Config { return w.cfg }

// Tick is the current tick; the first is 1, and Step advances it by one.
func (w *World) Tick() uint32 { return w.tick }

// Capacity is the number of slots.
func (w *World) Capacity() int { return len(w.meta) }

// Count is the number of live entities, avatars included.
func (w *World) Count() int { return w.population + w.avatars }

// Step advances the simulation by dt seconds and the tick by one. Step(0) is a quiet tick:
// nothing moves, rests, ages or spawns. The bumps of the previous tick are dropped.
func (w *World) Step(dt float32) {
	w.tick++
	w.reach += float64(maxSpeed * abs(dt))
	w.trimLog()
	w.bumps = w.bumps[:0]
	w.kill = w.kill[:0]
	for s := range w.meta {
		if !w.meta[s].Alive || dt == 0 {
			continue
		}
		if w.life[s] -= dt; w.life[s] <= 0 {
			w.kill = append(w.kill, uint16(s))
			continue
		}
		w.move(s, dt)
	}
	for _, s := range w.kill {
		w.despawn(s)
		w.spawn(w.randomKind(), w.randomPoint())
	}
	w.quantize()
	w.grid.rebuild(w.meta, w.pos)
}

// move advances one entity: rest, walk toward the waypoint, or arrive.
func (w *World) move(s int, dt float32) {
	if w.rest[s] > 0 {
		if w.rest[s] -= dt; w.rest[s] > 0 {
			return
		}
		w.rest[s] = 0
		w.pickTarget(s)
	}
	if step := w.kind[s].speed() * dt; w.remain[s] > step {
		p := &w.pos[s]
		for i := range 3 {
			p[i] += w.vel[s][i] * dt
		}
		w.remain[s] -= step
		return
	}
	w.pos[s] = w.target[s]
	w.steered[s] = false
	if w.cfg.RestMaxSec > 0 {
		w.rest[s] = w.cfg.RestMinSec + w.rng.float()*(w.cfg.RestMaxSec-w.cfg.RestMinSec)
		w.vel[s] = [3]float32{}
		w.bumps = append(w.bumps, Bump{Slot: uint16(s), Gen: w.meta[s].Gen, Amount: ArrivalBump})
		if w.rest[s] > 0 {
			return
		}
	}
	w.pickTarget(s)
}

// heading points the entity's velocity at its waypoint and sets the distance left to walk; the
// entity then walks in a straight line without recomputing either.
func (w *World) heading(s int) {
	p, t := w.pos[s], w.target[s]
	d := [3]float32{t[0] - p[0], t[1] - p[1], t[2] - p[2]}
	dist := float32(math.Sqrt(float64(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])))
	w.remain[s] = dist
	if dist == 0 {
		w.vel[s] = [3]float32{}
		return
	}
	speed := w.kind[s].speed()
	for i := range 3 {
		w.vel[s][i] = d[i] / dist * speed
	}
}

// pickTarget chooses the next waypoint within WanderRadius and faces it.
func (w *World) pickTarget(s int) {
	if w.steered[s] {
		return
	}
	p := w.pos[s]
	r := w.cfg.WanderRadius
	h := w.cfg.HalfExtent
	t := [3]float32{
		clamp(p[0]+(2*w.rng.float()-1)*r, -h, h),
		clamp(p[1]+(2*w.rng.float()-1)*r, -h, h),
		0,
	}
	if w.kind[s] == KindDrone {
		t[2] = 10 + 50*w.rng.float()
	}
	w.aim(s, t)
}

// aim faces the entity toward t and heads for it, so the velocity replicated this tick is the one
// it moves with next tick.
func (w *World) aim(s int, t [3]float32) {
	w.target[s] = t
	p := w.pos[s]
	if dx, dy := t[0]-p[0], t[1]-p[1]; dx != 0 || dy != 0 {
		w.rot[s] = protocol.YawRotation(math.Atan2(float64(dy), float64(dx)))
	}
	w.heading(s)
}

// quantize refreshes every live entity's replicated state, stamps the ones that changed, and
// records the tick's states in the history.
func (w *World) quantize() {
	for s := range w.meta {
		if !w.meta[s].Alive {
			continue
		}
		if q := w.quantized(s); q != w.states[s] {
			w.states[s] = q
			w.meta[s].Changed = w.tick
		}
		w.meta[s].X, w.meta[s].Y = w.pos[s][0], w.pos[s][1]
	}
	row := int(w.tick&uint32(w.cfg.HistoryTicks-1)) * len(w.states)
	copy(w.hist[row:row+len(w.states)], w.states)
}

func (w *World) quantized(s int) protocol.State {
	p, v := &w.pos[s], &w.vel[s]
	return protocol.State{
		Pos: [3]int32{protocol.QuantizePos(p[0]), protocol.QuantizePos(p[1]), protocol.QuantizePos(p[2])},
		Rot: w.rot[s],
		Vel: [3]int16{protocol.QuantizeVel(v[0]), protocol.QuantizeVel(v[1]), protocol.QuantizeVel(v[2])},
	}
}

func (w *World) randomKind() Kind {
	switch x := w.rng.float(); {
	case x < 0.6:
		return KindWalker
	case x < 0.85:
		return KindRunner
	}
	return KindDrone
}

func (w *World) randomPoint() [3]float32 {
	h := w.cfg.HalfExtent
	return [3]float32{(2*w.rng.float() - 1) * h, (2*w.rng.float() - 1) * h, 0}
}

// spawn places a new entity; it reports false when every slot is taken.
func (w *World) spawn(k Kind, p [3]float32) (ID, bool) {
	if w.freeLen == 0 {
		return 0, false
	}
	s := w.free[w.freeHead]
	w.freeHead = (w.freeHead + 1) % len(w.free)
	w.freeLen--
	w.meta[s].Gen++
	if w.meta[s].Gen == 0 { // generation 0 is never used, so the zero ID names nothing
		w.meta[s].Gen = 1
	}
	w.meta[s].Alive = true
	w.kind[s] = k
	w.pos[s] = p
	w.vel[s] = [3]float32{}
	w.rest[s] = 0
	w.steered[s] = false
	w.life[s] = float32(math.Inf(1))
	if k == KindAvatar {
		w.avatars++
	} else {
		w.population++
		if m := w.cfg.LifetimeMeanSec; m > 0 {
			w.life[s] = m * (0.5 + w.rng.float())
		}
	}
	w.pickTarget(int(s))
	// The state is set now so a spawn between ticks is visible at once; changed marks it new.
	w.states[s] = w.quantized(int(s))
	w.meta[s].Changed = w.tick
	w.meta[s].X, w.meta[s].Y = p[0], p[1]
	w.hist[int(w.tick&uint32(w.cfg.HistoryTicks-1))*len(w.states)+int(s)] = w.states[s]
	w.logSpawn(s)
	return makeID(s, w.meta[s].Gen), true
}

// maxLog bounds the spawn log, in entries per slot of capacity: a world that spawns more within
// its history forgets the oldest, and SpawnedSince reports the ticks it no longer covers.
const maxLog = 2

// logSpawn adds slot s, spawned now, to the spawn log. A full log drops its older half, and
// the rest of the spawns of the tick it stopped in, so that it still holds every spawn from
// bornFrom on.
func (w *World) logSpawn(s uint16) {
	if n := len(w.born); n >= maxLog*len(w.meta) {
		w.bornFrom = w.bornAt[n/2-1] + 1
		w.dropLog()
	}
	w.born = append(w.born, s)
	w.bornAt = append(w.bornAt, w.tick)
}

// trimLog drops from the spawn log the spawns older than the history, at the start of a Step.
func (w *World) trimLog() {
	if h := uint32(w.cfg.HistoryTicks); w.tick > h {
		w.bornFrom = max(w.bornFrom, w.tick-h+1)
	}
	w.dropLog()
}

// dropLog drops the spawns before bornFrom from the spawn log.
func (w *World) dropLog() {
	k := 0
	for k < len(w.bornAt) && w.bornAt[k] < w.bornFrom {
		k++
	}
	if k > 0 {
		w.born = w.born[:copy(w.born, w.born[k:])]
		w.bornAt = w.bornAt[:copy(w.bornAt, w.bornAt[k:])]
	}
}

func (w *World) despawn(s uint16) {
	w.meta[s].Alive = false
	if w.kind[s] == KindAvatar {
		w.avatars--
	} else {
		w.population--
	}
	w.meta[s].Changed = w.tick
	w.free[(w.freeHead+w.freeLen)%len(w.free)] = s
	w.freeLen++
}

// ErrFull is returned when every slot is taken.
var ErrFull = errors.New("world: no free entity slot")

// AddAvatar spawns an avatar at a random point. It is visible to queries from the next Step.
func (w *World) AddAvatar() (ID, error) {
	id, ok := w.spawn(KindAvatar, w.randomPoint())
	if !ok {
		return 0, ErrFull
	}
	return id, nil
}

// Remove despawns the entity id names; it reports false if id names no live entity.
func (w *World) Remove(id ID) bool {
	if !w.Valid(id) {
		return false
	}
	w.despawn(id.Slot())
	return true
}

// Valid reports whether id names a live entity.
func (w *World) Valid(id ID) bool {
	s := int(id.Slot())
	return s < len(w.meta) && w.meta[s].Alive && w.meta[s].Gen == id.Gen()
}

// SetTarget sends the entity to walk to (x, y); it rests there, then wanders again. It reports
// false if id names no live entity.
func (w *World) SetTarget(id ID, x, y float32) bool {
	if !w.Valid(id) {
		return false
	}
	s := int(id.Slot())
	h := w.cfg.HalfExtent
	w.rest[s] = 0
	w.steered[s] = true
	w.aim(s, [3]float32{clamp(x, -h, h), clamp(y, -h, h), w.pos[s][2]})
	return true
}

// Position returns the entity's simulated position in meters.
func (w *World) Position(id ID) (x, y, z float32, ok bool) {
	if !w.Valid(id) {
		return 0, 0, 0, false
	}
	p := w.pos[id.Slot()]
	return p[0], p[1], p[2], true
}

// Bump raises the replication priority of the entity for this tick (until the next Step), by
// amount, in ticks of full relevance. It reports false, and bumps nothing, if id names no live
// entity or amount is not a positive finite number: a priority only grows until the entity is
// sent, and the sessions order entities by it.
func (w *World) Bump(id ID, amount float32) bool {
	if !w.Valid(id) || !(amount > 0 && amount <= math.MaxFloat32) {
		return false
	}
	w.bumps = append(w.bumps, Bump{Slot: id.Slot(), Gen: id.Gen(), Amount: amount})
	return true
}

// Bumps are this tick's priority bumps.
func (w *World) Bumps() []Bump { return w.bumps }

// Reach bounds how far entities move: between two calls, no entity alive through both moved
// farther than the difference of their results (in meters, in any direction), however many
// Steps ran between them. An entity that spawned between them may be anywhere (SpawnedSince).
func (w *World) Reach() float64 { return w.reach }

// SpawnedSince lists the slots whose entities spawned at tick or later, a spawn's tick being the
// world's Tick when it spawned (a Step advances the tick, then spawns). So a viewer that looked at
// the world at some tick, and asks later with that tick, sees every entity spawned since it
// looked (and some it may have seen already). A slot may be listed more than once, and its entity
// may have despawned since; the list changes at the next Step or spawn.
//
// It reports false, and lists nothing, for a tick it no longer covers: one that is not among the
// last HistoryTicks, or one older than the spawns it kept, the newest twice the world's capacity
// of them (a world that spawns more than that within the history).
func (w *World) SpawnedSince(tick uint32) ([]uint16, bool) {
	if tick < w.bornFrom || w.tick-tick >= uint32(w.cfg.HistoryTicks) {
		return nil, false
	}
	i, _ := slices.BinarySearch(w.bornAt, tick)
	return w.born[i:], true
}

// Slot accessors for replication. They take a slot below Capacity; for a slot that is not alive
// they return the last incarnation's values.

// Alive reports whether the slot holds a live entity.
func (w *World) Alive(slot uint16) bool { return w.meta[slot].Alive }

// Gen is the slot's generation.
func (w *World) Gen(slot uint16) uint16 { return w.meta[slot].Gen }

// KindOf is the slot's entity kind.
func (w *World) KindOf(slot uint16) Kind { return w.kind[slot] }

// XY is the slot's simulated horizontal position, in meters, as interest queries measure it.
func (w *World) XY(slot uint16) (x, y float32) { p := &w.pos[slot]; return p[0], p[1] }

// State is the slot's current quantized state.
func (w *World) State(slot uint16) *protocol.State { return &w.states[slot] }

// Changed is the last tick the slot's state changed (or its entity spawned or despawned).
func (w *World) Changed(slot uint16) uint32 { return w.meta[slot].Changed }

// Meta returns the slot's position, liveness, generation and change tick in one read.
func (w *World) Meta(slot uint16) SlotMeta { return w.meta[slot] }

// Metas returns every slot's Meta, indexed by slot, for passes over many slots. The caller must
// not modify it; it changes at the next Step.
func (w *World) Metas() []SlotMeta { return w.meta }

// StateAt returns the slot's quantized state at a past tick, if tick is one of the last
// HistoryTicks ticks.
func (w *World) StateAt(slot uint16, tick uint32) (*protocol.State, bool) {
	h := uint32(w.cfg.HistoryTicks)
	if tick > w.tick || w.tick-tick >= h {
		return nil, false
	}
	return &w.hist[int(tick&(h-1))*len(w.states)+int(slot)], true
}

// Query appends to out every live entity within radius meters of (x, y), measured on the
// horizontal plane, and returns it. With out's capacity reused it allocates nothing.
func (w *World) Query(x, y, radius float32, out []Hit) []Hit {
	return w.grid.query(x, y, radius, out)
}

// QueryNew is Query for the entities not in known, a bitmap of slots (slot s is bit s%8 of
// known[s/8]) that covers every slot: what a viewer tracking the known slots newly sees.
func (w *World) QueryNew(x, y, radius float32, known []uint8, out []Hit) []Hit {
	return w.grid.queryNew(x, y, radius, known[:(len(w.meta)+7)/8], out)
}

func clamp(v, lo, hi float32) float32 { return max(lo, min(hi, v)) }

func abs(v float32) float32 { return float32(math.Abs(float64(v))) }

// rng is splitmix64: small, fast and good enough for a simulation.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float returns a number in [0, 1).
func (r *rng) float() float32 { return float32(r.next()>>40) / (1 << 24) }
