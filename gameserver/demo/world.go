package demo

import (
	"errors"
	"fmt"
	"math"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Entity kinds of the demo.
const (
	KindAvatar entity.Kind = 1 // a player's avatar; walks like a runner
	KindWalker entity.Kind = 2 // slow, on the ground
	KindRunner entity.Kind = 3 // fast, on the ground
	KindDrone  entity.Kind = 4 // fast, flies between altitudes
)

// speed is a kind's walking speed, in m/s.
func speed(k entity.Kind) float32 {
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
	// HistoryTicks is how many ticks of quantized states the store keeps; a power of two,
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
	if c.WanderRadius == 0 {
		c.WanderRadius = 200
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("demo: "+format, args...))
		}
	}
	check(c.Population >= 0 && c.Population <= c.Capacity, "Population %d not in [0, Capacity %d]", c.Population, c.Capacity)
	check(c.WanderRadius > 0, "WanderRadius %v must be positive", c.WanderRadius)
	check(c.RestMinSec >= 0 && c.RestMaxSec >= c.RestMinSec, "rest bounds [%v, %v] invalid", c.RestMinSec, c.RestMaxSec)
	check(c.LifetimeMeanSec >= 0, "LifetimeMeanSec %v must not be negative", c.LifetimeMeanSec)
	return errors.Join(errs...)
}

// World is the demo's simulation: entities that wander between waypoints, rest, spawn and
// despawn, and avatars that walk where their players send them. It writes every entity into its
// entity store. Per-slot data is kept in parallel slices (structure of arrays), indexed by the
// entity's store slot, so the per-tick pass streams through memory.
//
// The simulation is deterministic for a seed: it has its own random generator and never reads
// the clock. A World is not safe for concurrent use.
type World struct {
	cfg   Config
	store *entity.Store
	rng   rng

	id      []entity.ID // by slot; None when the slot is free
	kind    []entity.Kind
	xf      []entity.Transform
	target  [][3]float32
	remain  []float32 // meters left to the waypoint
	rest    []float32 // seconds left at rest; 0 when moving
	life    []float32 // seconds left to live; +Inf for avatars and immortal entities
	steered []bool    // walking to a target set by SetTarget

	population int
	avatars    int
	kill       []uint16
}

// NewWorld creates a world with Population entities placed at random, in a store of its own.
func NewWorld(cfg Config) (*World, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := entity.NewStore(entity.Config{Capacity: cfg.Capacity, HalfExtent: cfg.HalfExtent, CellSize: cfg.CellSize,
		HistoryTicks: cfg.HistoryTicks})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	n := cfg.Capacity
	w := &World{
		cfg:     cfg,
		store:   st,
		rng:     rng{s: cfg.Seed},
		id:      make([]entity.ID, n),
		kind:    make([]entity.Kind, n),
		xf:      make([]entity.Transform, n),
		target:  make([][3]float32, n),
		remain:  make([]float32, n),
		rest:    make([]float32, n),
		life:    make([]float32, n),
		steered: make([]bool, n),
		kill:    make([]uint16, 0, n),
	}
	for range cfg.Population {
		w.spawn(w.randomKind(), w.randomPoint())
	}
	st.Commit()
	return w, nil
}

// Config returns the world's configuration with defaults applied.
func (w *World) Config() Config { return w.cfg }

// Store is the entity store the world writes.
func (w *World) Store() *entity.Store { return w.store }

// Count is the number of live entities, avatars included.
func (w *World) Count() int { return w.population + w.avatars }

// Simulate advances the simulation by dt seconds and writes what changed into the store; the
// store's tick must have been advanced. Simulate(0) is a quiet tick: nothing moves, rests, ages
// or spawns.
func (w *World) Simulate(dt float32) {
	w.kill = w.kill[:0]
	if dt == 0 {
		return
	}
	for s, id := range w.id {
		if id == entity.None {
			continue
		}
		if w.life[s] -= dt; w.life[s] <= 0 {
			w.kill = append(w.kill, uint16(s))
			continue
		}
		if w.move(s, dt) {
			// Every transform the world writes is finite, so Set cannot fail.
			_ = w.store.Set(id, &w.xf[s])
		}
	}
	for _, s := range w.kill {
		w.despawn(s)
		w.spawn(w.randomKind(), w.randomPoint())
	}
}

// Step advances the store's tick and the simulation by dt, and commits the store, as the server
// loop does around a game's Step: for tests and tools that run the world without a server.
func (w *World) Step(dt float32) {
	w.store.Advance()
	w.Simulate(dt)
	w.store.Commit()
}

// move advances one entity: rest, walk toward the waypoint, or arrive. It reports whether the
// entity's transform changed.
func (w *World) move(s int, dt float32) bool {
	if w.rest[s] > 0 {
		if w.rest[s] -= dt; w.rest[s] > 0 {
			return false
		}
		w.rest[s] = 0
		w.pickTarget(s)
	}
	x := &w.xf[s]
	if step := speed(w.kind[s]) * dt; w.remain[s] > step {
		for i := range 3 {
			x.Pos[i] += x.Vel[i] * dt
		}
		w.remain[s] -= step
		return true
	}
	x.Pos = w.target[s]
	w.steered[s] = false
	if w.cfg.RestMaxSec > 0 {
		w.rest[s] = w.cfg.RestMinSec + w.rng.float()*(w.cfg.RestMaxSec-w.cfg.RestMinSec)
		x.Vel = [3]float32{}
		_ = w.store.Bump(w.id[s], ArrivalBump)
		if w.rest[s] > 0 {
			return true
		}
	}
	w.pickTarget(s)
	return true
}

// heading points the entity's velocity at its waypoint and sets the distance left to walk; the
// entity then walks in a straight line without recomputing either.
func (w *World) heading(s int) {
	x := &w.xf[s]
	p, t := x.Pos, w.target[s]
	d := [3]float32{t[0] - p[0], t[1] - p[1], t[2] - p[2]}
	dist := float32(math.Sqrt(float64(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])))
	w.remain[s] = dist
	if dist == 0 {
		x.Vel = [3]float32{}
		return
	}
	v := speed(w.kind[s])
	for i := range 3 {
		x.Vel[i] = d[i] / dist * v
	}
}

// pickTarget chooses the next waypoint within WanderRadius and faces it.
func (w *World) pickTarget(s int) {
	if w.steered[s] {
		return
	}
	p := w.xf[s].Pos
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
	p := w.xf[s].Pos
	if dx, dy := t[0]-p[0], t[1]-p[1]; dx != 0 || dy != 0 {
		w.xf[s].Rot = protocol.YawRotation(math.Atan2(float64(dy), float64(dx)))
	}
	w.heading(s)
}

func (w *World) randomKind() entity.Kind {
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
func (w *World) spawn(k entity.Kind, p [3]float32) (entity.ID, bool) {
	// The store assigns the slot; the world's state for it is set before the transform is
	// written, since facing the first waypoint sets the velocity and the rotation.
	id, err := w.store.Spawn(k, entity.Transform{Pos: p})
	if err != nil {
		return entity.None, false
	}
	s := int(id.Slot())
	w.id[s] = id
	w.kind[s] = k
	w.xf[s] = entity.Transform{Pos: p}
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
	w.pickTarget(s)
	_ = w.store.Set(id, &w.xf[s])
	return id, true
}

func (w *World) despawn(s uint16) {
	if w.kind[s] == KindAvatar {
		w.avatars--
	} else {
		w.population--
	}
	_ = w.store.Despawn(w.id[s])
	w.id[s] = entity.None
}

// ErrFull is returned when every slot is taken.
var ErrFull = errors.New("demo: no free entity slot")

// AddAvatar spawns an avatar at a random point. It is visible to queries from the next Commit.
func (w *World) AddAvatar() (entity.ID, error) {
	id, ok := w.spawn(KindAvatar, w.randomPoint())
	if !ok {
		return entity.None, ErrFull
	}
	return id, nil
}

// Remove despawns the entity id names; it reports false if id names no live entity.
func (w *World) Remove(id entity.ID) bool {
	if !w.store.Valid(id) {
		return false
	}
	w.despawn(id.Slot())
	return true
}

// SetTarget sends the entity to walk to (x, y); it rests there, then wanders again. It reports
// false if id names no live entity.
func (w *World) SetTarget(id entity.ID, x, y float32) bool {
	if !w.store.Valid(id) {
		return false
	}
	s := int(id.Slot())
	h := w.cfg.HalfExtent
	w.rest[s] = 0
	w.steered[s] = true
	w.aim(s, [3]float32{clamp(x, -h, h), clamp(y, -h, h), w.xf[s].Pos[2]})
	_ = w.store.Set(id, &w.xf[s])
	return true
}

// Position returns the entity's simulated position in meters.
func (w *World) Position(id entity.ID) (x, y, z float32, ok bool) {
	if !w.store.Valid(id) {
		return 0, 0, 0, false
	}
	p := w.xf[id.Slot()].Pos
	return p[0], p[1], p[2], true
}

func clamp(v, lo, hi float32) float32 { return max(lo, min(hi, v)) }

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
