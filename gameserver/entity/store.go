package entity

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// ID names an entity incarnation: the slot in its low 16 bits, the slot's generation above. The
// zero ID names nothing.
type ID uint32

// None is the zero ID, which names no entity.
const None ID = 0

// Slot is the entity's slot, its id on the wire.
func (id ID) Slot() uint16 { return uint16(id) }

// Gen is the slot generation of the incarnation.
func (id ID) Gen() uint16 { return uint16(id >> 16) }

// MakeID returns the ID of a slot's incarnation gen.
func MakeID(slot, gen uint16) ID { return ID(uint32(gen)<<16 | uint32(slot)) }

func (id ID) String() string { return fmt.Sprintf("%d/%d", id.Slot(), id.Gen()) }

// Kind is what an entity is, as the game defines it; it is replicated in spawn records.
type Kind uint8

// Transform is an entity's simulated state as the game writes it: position in meters,
// velocity in meters per second, and rotation as a packed quaternion (protocol.PackRotation,
// protocol.YawRotation). Clients are sent it quantized (protocol.State): positions at 1/64 m
// within ±protocol.WorldHalfExtent, velocities at 1/64 m/s within ±128 m/s; values beyond are
// clamped.
type Transform struct {
	Pos [3]float32
	Vel [3]float32
	Rot uint32
}

// finite reports whether every coordinate is a finite number: x-x is 0 for a finite x and NaN
// for an infinity or a NaN, and a sum with a NaN in it is NaN, so one comparison judges all six.
func (t *Transform) finite() bool {
	p, v := &t.Pos, &t.Vel
	return (p[0]-p[0])+(p[1]-p[1])+(p[2]-p[2])+(v[0]-v[0])+(v[1]-v[1])+(v[2]-v[2]) == 0
}

// Quantize returns the state clients are sent for t.
func (t *Transform) Quantize() protocol.State {
	p, v := &t.Pos, &t.Vel
	return protocol.State{
		Pos: [3]int32{protocol.QuantizePos(p[0]), protocol.QuantizePos(p[1]), protocol.QuantizePos(p[2])},
		Rot: t.Rot,
		Vel: [3]int16{protocol.QuantizeVel(v[0]), protocol.QuantizeVel(v[1]), protocol.QuantizeVel(v[2])},
	}
}

// quantize returns the state clients are sent for t, of the parts a kind has.
func (t *Transform) quantize(parts protocol.Parts) protocol.State {
	q := t.Quantize()
	if parts == protocol.Transform {
		return q
	}
	if parts&protocol.PartPosition == 0 {
		q.Pos = [3]int32{}
	}
	if parts&protocol.PartRotation == 0 {
		q.Rot = 0
	}
	if parts&protocol.PartVelocity == 0 {
		q.Vel = [3]int16{}
	}
	return q
}

// MaxHalfExtent is the largest Config.HalfExtent: the wire format's range, less a meter.
const MaxHalfExtent = protocol.WorldHalfExtent - 1

// Config configures a Store.
type Config struct {
	// Capacity is the number of entity slots; at most protocol.MaxEntities.
	Capacity int
	// HalfExtent is the half width of the area the interest grid covers, in meters: ±HalfExtent
	// on X and Y. Entities beyond it are found by queries too, from the grid's outer cells.
	// Default 2000, at most MaxHalfExtent.
	HalfExtent float32
	// CellSize is the edge of a cell of the interest grid, in meters. Default 128.
	CellSize float32
	// HistoryTicks is how many ticks of quantized states the store keeps (StateAt); a power of
	// two, default 64. Replication deltas against states in it, so it bounds how long a session
	// may go unserved and keep its baselines.
	HistoryTicks int
	// Schema declares the game's entity kinds: their transform parts and fields. nil is any kind
	// with the whole transform and no fields (protocol.TransformSchema).
	Schema *protocol.Schema
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
	return c
}

func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("entity: "+format, args...))
		}
	}
	check(c.Capacity > 0 && c.Capacity <= protocol.MaxEntities, "Capacity %d not in [1, %d]", c.Capacity, protocol.MaxEntities)
	check(c.HalfExtent > 0 && c.HalfExtent <= MaxHalfExtent, "HalfExtent %v not in (0, %d]", c.HalfExtent, MaxHalfExtent)
	check(c.CellSize >= 1 && c.CellSize <= 2*c.HalfExtent, "CellSize %v not in [1, 2*HalfExtent]", c.CellSize)
	check(c.HistoryTicks >= 2 && c.HistoryTicks <= 4096 && c.HistoryTicks&(c.HistoryTicks-1) == 0,
		"HistoryTicks %d is not a power of two in [2, 4096]", c.HistoryTicks)
	if c.Schema != nil {
		if err := c.Schema.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SlotMeta is what replication reads of a slot every tick, packed together in 16 bytes, so a
// pass over a viewer's entities reads one cache line per entity.
type SlotMeta struct {
	X, Y    float32 // horizontal position at the last Commit (at its spawn if it spawned since)
	Changed uint32  // last tick the state or the fields changed, or the entity spawned or despawned
	Gen     uint16  // slot generation
	Alive   bool
	// Special is set for an entity whose visibility is not the default (Visibility), or whose
	// kind has no position: replication then reads its Visibility.
	Special bool
}

// Dist2 is the squared horizontal distance from the slot's position to (x, y), in m², as interest
// queries measure it.
func (m *SlotMeta) Dist2(x, y float32) float32 {
	dx, dy := m.X-x, m.Y-y
	return dx*dx + dy*dy
}

// Bump raises an entity's replication priority for one tick.
type Bump struct {
	Slot   uint16
	Gen    uint16
	Amount float32
}

// Hit is an entity found by a query.
type Hit struct {
	Slot  uint16
	Dist2 float32 // squared horizontal distance to the query point, m²
}

// Errors of the writing methods.
var (
	// ErrFull: every slot is taken.
	ErrFull = errors.New("entity: no free entity slot")
	// ErrNoEntity: the ID names no live entity (the zero ID, a despawned one, a stale
	// generation, or a slot beyond the capacity).
	ErrNoEntity = errors.New("entity: no such entity")
	// ErrNotFinite: a position or velocity coordinate is NaN or infinite.
	ErrNotFinite = errors.New("entity: transform is not finite")
	// ErrBadBump: a bump amount that is not a positive finite number.
	ErrBadBump = errors.New("entity: bump amount must be a positive finite number")
	// ErrUnknownKind: a kind the store's schema does not declare.
	ErrUnknownKind = errors.New("entity: the schema declares no such kind")
)

// Store holds a game's entities for replication. Per-slot data is kept in parallel slices
// (structure of arrays) so the per-tick passes stream through memory.
type Store struct {
	cfg   Config
	tick  uint32
	count int

	layout *protocol.Layout
	stride int // field words per slot

	meta   []SlotMeta
	kind   []Kind
	xf     []Transform      // as the game wrote it
	states []protocol.State // quantized at the last Commit (at spawn for a spawn since)
	hist   []protocol.State // HistoryTicks rows of Capacity states, row = tick % HistoryTicks
	// Field words, stride per slot: as the game wrote them, as committed, and their history in
	// rows like hist's.
	written, fields, fieldHist []uint32
	vis                        []Visibility
	always                     []uint16 // the live slots that are always relevant
	// dirty marks the slots Set since the last Commit: a byte per slot, so that Set is small
	// enough to inline into the game's loop, and Commit reads them in one pass.
	dirty []bool

	free     []uint16 // FIFO of free slots, so a slot is reused as late as possible
	freeHead int
	freeLen  int

	// bumps are the committed tick's bumps, then those made since its Commit, which belong to
	// the next tick.
	bumps     []Bump
	committed int // bumps of the committed tick
	grid      grid
	reach     float64
	log       spawnLog
}

// NewStore returns an empty store at tick 1.
func NewStore(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	sch := cfg.Schema
	if sch == nil {
		sch = protocol.TransformSchema()
	}
	layout, err := sch.Compile()
	if err != nil {
		return nil, fmt.Errorf("entity: %w", err)
	}
	n := cfg.Capacity
	st := layout.Stride()
	s := &Store{
		cfg:       cfg,
		layout:    layout,
		stride:    st,
		written:   make([]uint32, n*st),
		fields:    make([]uint32, n*st),
		fieldHist: make([]uint32, cfg.HistoryTicks*n*st),
		vis:       make([]Visibility, n),
		tick:      1,
		meta:      make([]SlotMeta, n),
		kind:      make([]Kind, n),
		xf:        make([]Transform, n),
		states:    make([]protocol.State, n),
		hist:      make([]protocol.State, cfg.HistoryTicks*n),
		dirty:     make([]bool, n),
		free:      make([]uint16, n),
		freeLen:   n,
		bumps:     make([]Bump, 0, 64),
		grid:      newGrid(cfg.HalfExtent, cfg.CellSize, n),
		log:       newSpawnLog(n),
	}
	for i := range s.free {
		s.free[i] = uint16(i)
	}
	return s, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// Tick is the current tick: the first is 1, and Advance moves it on by one.
func (s *Store) Tick() uint32 { return s.tick }

// Capacity is the number of slots.
func (s *Store) Capacity() int { return len(s.meta) }

// HistoryTicks is how many ticks of states StateAt can return.
func (s *Store) HistoryTicks() int { return s.cfg.HistoryTicks }

// Count is the number of live entities.
func (s *Store) Count() int { return s.count }

// Valid reports whether id names a live entity.
func (s *Store) Valid(id ID) bool {
	i := int(id.Slot())
	return i < len(s.meta) && s.meta[i].Alive && s.meta[i].Gen == id.Gen()
}

// Spawn places a new entity of kind k with transform t, its fields zero and visible to every
// session. Its state is set at once, stamped at the current tick, and it is listed by
// SpawnedSince; queries find it from the next Commit. The kind must be one the schema declares.
func (s *Store) Spawn(k Kind, t Transform) (ID, error) {
	kl := s.layout.Kind(uint8(k))
	if kl == nil {
		return None, fmt.Errorf("%w: %d", ErrUnknownKind, k)
	}
	if !t.finite() {
		return None, ErrNotFinite
	}
	if s.freeLen == 0 {
		return None, ErrFull
	}
	slot := s.free[s.freeHead]
	s.freeHead = (s.freeHead + 1) % len(s.free)
	s.freeLen--
	m := &s.meta[slot]
	m.Gen++
	if m.Gen == 0 { // generation 0 is never used, so the zero ID names nothing
		m.Gen = 1
	}
	m.Alive = true
	m.Changed = s.tick
	m.X, m.Y = t.Pos[0], t.Pos[1]
	placeless := kl.Parts&protocol.PartPosition == 0
	if placeless {
		m.X, m.Y = 0, 0
	}
	m.Special = placeless
	s.kind[slot] = k
	s.xf[slot] = t
	s.states[slot] = t.quantize(kl.Parts)
	row := int(s.tick & uint32(s.cfg.HistoryTicks-1))
	s.hist[row*len(s.states)+int(slot)] = s.states[slot]
	s.vis[slot] = Visibility{placeless: placeless}
	if s.stride > 0 {
		f := int(slot) * s.stride
		clear(s.written[f : f+s.stride])
		clear(s.fields[f : f+s.stride])
		h := (row*len(s.meta) + int(slot)) * s.stride
		clear(s.fieldHist[h : h+s.stride])
	}
	if placeless {
		s.always = append(s.always, slot)
	}
	s.count++
	s.log.add(slot, s.tick, len(s.meta))
	return MakeID(slot, m.Gen), nil
}

// Despawn removes the entity id names; clients drop it from their views.
func (s *Store) Despawn(id ID) error {
	if !s.Valid(id) {
		return ErrNoEntity
	}
	slot := id.Slot()
	if s.vis[slot].Relevant() {
		s.dropAlways(slot)
	}
	s.meta[slot].Alive = false
	s.meta[slot].Changed = s.tick
	s.free[(s.freeHead+s.freeLen)%len(s.free)] = slot
	s.freeLen++
	s.count--
	return nil
}

// Set writes the entity's transform, a copy of *t; Commit quantizes it, and if its quantized
// state changed, clients are sent the change. It refuses a transform that is not finite, keeping
// the last one. It takes a pointer because a game calls it for every entity that moves, every
// tick: a Transform holds arrays, which Go passes on the stack.
func (s *Store) Set(id ID, t *Transform) error {
	if !s.Valid(id) {
		return ErrNoEntity
	}
	if !t.finite() {
		return ErrNotFinite
	}
	s.xf[id.Slot()] = *t
	s.dirty[id.Slot()] = true
	return nil
}

// Get returns the transform last written for the entity.
func (s *Store) Get(id ID) (Transform, bool) {
	if !s.Valid(id) {
		return Transform{}, false
	}
	return s.xf[id.Slot()], true
}

// KindOf returns the entity's kind.
func (s *Store) KindOf(id ID) (Kind, bool) {
	if !s.Valid(id) {
		return 0, false
	}
	return s.kind[id.Slot()], true
}

// Bump raises the entity's replication priority by amount, in ticks of full relevance, e.g. after
// a collision, so that its state reaches clients early: for the tick being stepped, or for the
// next one when it is made between ticks (in Join, Leave or Input). A priority only grows until
// the entity is sent, and views order entities by it, so an amount must be a positive finite
// number.
func (s *Store) Bump(id ID, amount float32) error {
	if !s.Valid(id) {
		return ErrNoEntity
	}
	if !(amount > 0 && amount <= math.MaxFloat32) {
		return ErrBadBump
	}
	s.bumps = append(s.bumps, Bump{Slot: id.Slot(), Gen: id.Gen(), Amount: amount})
	return nil
}

// Advance starts the next tick: the tick moves on by one, and the committed tick's bumps are
// dropped. The server loop calls it before the game steps; a game never does.
func (s *Store) Advance() {
	s.tick++
	s.log.trim(s.tick, uint32(s.cfg.HistoryTicks))
	s.bumps = s.bumps[:copy(s.bumps, s.bumps[s.committed:])]
	s.committed = 0
}

// reachSlack covers the rounding of the distances that interest compares against Reach.
const reachSlack = 1e-3

// Commit ends the tick's writes: the transforms Set since the last Commit are quantized, the
// entities whose state changed are stamped with the tick, Reach grows by the farthest any entity
// moved, the tick's states are recorded in the history, and the grid is rebuilt. The server loop
// calls it after the game steps; a game never does.
func (s *Store) Commit() {
	var far2 float32
	for slot, d := range s.dirty {
		if !d {
			continue
		}
		s.dirty[slot] = false
		m := &s.meta[slot]
		if !m.Alive {
			continue
		}
		kl := s.layout.Kind(uint8(s.kind[slot]))
		t := &s.xf[slot]
		if kl.Parts&protocol.PartPosition != 0 {
			dx, dy := t.Pos[0]-m.X, t.Pos[1]-m.Y
			far2 = max(far2, dx*dx+dy*dy)
			m.X, m.Y = t.Pos[0], t.Pos[1]
		}
		if q := t.quantize(kl.Parts); q != s.states[slot] {
			s.states[slot] = q
			m.Changed = s.tick
		}
		if kl.Words > 0 {
			f := slot * s.stride
			if w, c := s.written[f:f+kl.Words], s.fields[f:f+kl.Words]; !slices.Equal(w, c) {
				copy(c, w)
				m.Changed = s.tick
			}
		}
	}
	if far2 > 0 {
		s.reach += math.Sqrt(float64(far2))*(1+1e-6) + reachSlack
	}
	row := int(s.tick & uint32(s.cfg.HistoryTicks-1))
	copy(s.hist[row*len(s.states):(row+1)*len(s.states)], s.states)
	if n := len(s.fields); n > 0 {
		copy(s.fieldHist[row*n:(row+1)*n], s.fields)
	}
	s.grid.rebuild(s.meta, s.vis)
	s.committed = len(s.bumps)
}
