// Package arena is an example game built on netfleet's public API alone: players walk a square
// arena and fire projectiles that fly, hit another player or expire. It shows what a game brings
// to the engine — its own simulation, entity kinds, input encoding and admission rule — and what
// it leaves to it: the tick, the transport, interest, priorities, budgets and acknowledgements.
//
// Projectiles are short-lived: they spawn, move fast and despawn within a second or two. The
// fleet that runs arena sets budget.stateUpdateHz to 10, so state updates (where a player or a
// projectile is now) go out at 10 Hz while spawns and despawns still go out on the tick they
// happen: a projectile appears on every client in the frame of the tick it was fired in.
//
// # Entities
//
// The game declares its schema (Schema): its kinds, their transform parts and their fields.
//
//   - KindPlayer: a player's avatar; it walks at PlayerSpeed to the point its player sends it to.
//     Fields: health (0 to 100), team (red or blue), hits (the hits it scored).
//   - KindProjectile: fired by a player; it flies at ProjectileSpeed for ProjectileLifeSec
//     seconds, and despawns early when it leaves the arena or comes within HitRadius of a player
//     of the other team, which loses HitDamage health (its priority is bumped so the hit shows at
//     once); a player out of health respawns with all of it. Field: team.
//   - KindBeacon: a team's beacon at the team's base, seen by that team's players only.
//     Field: team.
//   - KindMarker: where a player walks to, seen by that player only.
//   - KindScore: the score, hits by team; it has no position, so every player sees it.
//     Fields: red, blue.
//
// Players join the team with fewer players, red first, and the game puts them in their team's
// group (game.Tick.SetGroups), so each team sees its own beacon and not the other's.
//
// # Input
//
// A COMMAND payload is one input, little-endian:
//
//	walk: 0x01, x float32, y float32   walk to (x, y) meters (clamped to the arena), then stop
//	fire: 0x02, yaw float32            fire a projectile toward yaw radians (0 is +X, π/2 is +Y)
//
// AppendWalk and AppendFire encode them, DecodeInput decodes them. A fire within FireCooldownSec
// of the player's last one is ignored, and so is any other payload.
//
// # Matches
//
// Run by netfleet's operator, an arena server is Allocated for a match; the allocation's payload
// (MatchPayload) says how long the match lasts and whether the server is reused after it
// (Ready) or replaced (Shutdown). The game declares MaxPlayers as its capacity, so allocations
// that ask for room for players fill a running match before they start another, and reports the
// matches it started on its GameServer (CounterMatches, CounterMatchSeconds).
//
// # Admission
//
// A player joins while fewer than MaxPlayers play, at the next of eight spawn points around the
// middle of the arena; a full arena refuses with protocol.CloseStalled (1013, try again later).
// A player that leaves takes its avatar with it; its projectiles fly on.
package arena

import (
	"errors"
	"fmt"
	"math"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Entity kinds.
const (
	KindPlayer     entity.Kind = 1
	KindProjectile entity.Kind = 2
	KindBeacon     entity.Kind = 3
	KindMarker     entity.Kind = 4
	KindScore      entity.Kind = 5
)

// Teams, the values of the team fields, and the game's group of each team's players.
const (
	Red  = 0
	Blue = 1
)

// Schema is the game's schema: its clients decode records with it (client.NewLayout).
func Schema() *protocol.Schema {
	team := protocol.Enum("team", "red", "blue")
	return &protocol.Schema{Kinds: []protocol.KindSchema{
		{ID: uint8(KindPlayer), Name: "player", Parts: protocol.Transform, Fields: []protocol.Field{
			protocol.Float("health", 0, 100, 1), team, protocol.Uint("hits", 16),
		}},
		{ID: uint8(KindProjectile), Name: "projectile", Parts: protocol.Transform, Fields: []protocol.Field{team}},
		{ID: uint8(KindBeacon), Name: "beacon", Parts: protocol.PartPosition, Fields: []protocol.Field{team}},
		{ID: uint8(KindMarker), Name: "marker", Parts: protocol.PartPosition},
		{ID: uint8(KindScore), Name: "score", Fields: []protocol.Field{protocol.Uint("red", 20), protocol.Uint("blue", 20)}},
	}}
}

// Game rules.
const (
	// HitBump is the priority bump of a player hit by a projectile.
	HitBump = 8
	// HitDamage is the health a hit takes.
	HitDamage = 25
)

// Config configures a Game. Zero fields take the defaults below.
type Config struct {
	// HalfExtent: the arena spans ±HalfExtent meters on X and Y. Default 100.
	HalfExtent float32
	// MaxPlayers is how many players play at once. Default 32.
	MaxPlayers int
	// PlayerSpeed is how fast players walk, in m/s. Default 6.
	PlayerSpeed float32
	// ProjectileSpeed is how fast projectiles fly, in m/s. Default 30.
	ProjectileSpeed float32
	// ProjectileLifeSec is how long a projectile flies, in seconds. Default 1.5.
	ProjectileLifeSec float32
	// FireCooldownSec is the least time between two shots of a player, in seconds. Default 0.25.
	FireCooldownSec float32
	// HitRadius is how close a projectile must come to a player to hit it, in meters. Default 1.
	HitRadius float32
	// Lifecycle, if set, is the server's lifecycle handle (serve.Setup.Lifecycle): the game
	// declares MaxPlayers as its capacity, and ends its matches through it (see MatchPayload).
	Lifecycle game.Lifecycle
}

func (c Config) withDefaults() Config {
	def := func(v *float32, d float32) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.HalfExtent, 100)
	def(&c.PlayerSpeed, 6)
	def(&c.ProjectileSpeed, 30)
	def(&c.ProjectileLifeSec, 1.5)
	def(&c.FireCooldownSec, 0.25)
	def(&c.HitRadius, 1)
	if c.MaxPlayers == 0 {
		c.MaxPlayers = 32
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("arena: "+format, args...))
		}
	}
	check(c.HalfExtent > 0 && c.HalfExtent <= entity.MaxHalfExtent, "HalfExtent %v not in (0, %d]", c.HalfExtent, entity.MaxHalfExtent)
	check(c.MaxPlayers > 0 && c.MaxPlayers <= 1024, "MaxPlayers %d not in [1, 1024]", c.MaxPlayers)
	for _, f := range []struct {
		name string
		v    float32
	}{{"PlayerSpeed", c.PlayerSpeed}, {"ProjectileSpeed", c.ProjectileSpeed}, {"ProjectileLifeSec", c.ProjectileLifeSec},
		{"FireCooldownSec", c.FireCooldownSec}, {"HitRadius", c.HitRadius}} {
		check(f.v > 0 && f.v < 1e6, "%s %v must be positive", f.name, f.v)
	}
	return errors.Join(errs...)
}

// maxShots is how many projectiles of one player can fly at once.
func (c Config) maxShots() int {
	return int(math.Ceil(float64(c.ProjectileLifeSec/c.FireCooldownSec))) + 1
}

// Game is the arena game. It implements game.Game.
type Game struct {
	cfg   Config
	st    *entity.Store
	next  int       // spawn point of the next player
	play  []*player // the players in the arena, in join order
	slots map[int]*player
	shots []shot // the projectiles in flight
	fired uint64
	hits  uint64
	// The entities of the teams and of the score, and the fields the game writes.
	beacons [2]entity.ID
	score   entity.ID
	teams   [2]int // players by team
	scores  [2]uint64
	// match is the current match (match.go); matchErr the error of its payload or of a
	// lifecycle call.
	match    match
	matchErr error
	f        struct {
		health, team, hits, shotTeam, beaconTeam, red, blue entity.Field
	}
}

type player struct {
	slot     int
	id       entity.ID
	marker   entity.ID // where it walks to, seen by the player only
	team     int
	health   float64
	grouped  bool // in its team's group
	x        entity.Transform
	target   [2]float32
	walking  bool
	cooldown float32 // seconds until it may fire again
	fire     bool    // a shot waits for the next step
	fireYaw  float32
	hits     int
}

type shot struct {
	id    entity.ID
	team  int
	owner *player // nil once the shooter left
	x     entity.Transform
	life  float32
}

// New creates a game with an empty arena, in a store of its own.
func New(cfg Config) (*Game, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	shots := cfg.MaxPlayers * cfg.maxShots()
	st, err := entity.NewStore(entity.Config{
		// The players, their markers and shots, two beacons and the score.
		Capacity:   min(2*cfg.MaxPlayers+shots+3, protocol.MaxEntities),
		HalfExtent: cfg.HalfExtent,
		CellSize:   max(1, min(32, 2*cfg.HalfExtent)),
		Schema:     Schema(),
	})
	if err != nil {
		return nil, fmt.Errorf("arena: %w", err)
	}
	g := &Game{
		cfg:   cfg,
		st:    st,
		play:  make([]*player, 0, cfg.MaxPlayers),
		slots: make(map[int]*player, cfg.MaxPlayers),
		shots: make([]shot, 0, shots),
	}
	if cfg.Lifecycle != nil {
		if err := cfg.Lifecycle.SetCapacity(cfg.MaxPlayers); err != nil {
			return nil, fmt.Errorf("arena: %w", err)
		}
	}
	g.f.health, g.f.team, g.f.hits = st.MustField(KindPlayer, "health"), st.MustField(KindPlayer, "team"), st.MustField(KindPlayer, "hits")
	g.f.shotTeam, g.f.beaconTeam = st.MustField(KindProjectile, "team"), st.MustField(KindBeacon, "team")
	g.f.red, g.f.blue = st.MustField(KindScore, "red"), st.MustField(KindScore, "blue")
	h := cfg.HalfExtent * 0.8
	for team, x := range []float32{-h, h} {
		id, err := st.Spawn(KindBeacon, entity.Transform{Pos: [3]float32{x, 0, 0}})
		if err == nil {
			err = errors.Join(st.SetEnum(id, g.f.beaconTeam, team), st.SetVisibility(id, entity.Visibility{Groups: teamGroup(team)}))
		}
		if err != nil {
			return nil, fmt.Errorf("arena: beacon: %w", err)
		}
		g.beacons[team] = id
	}
	if g.score, err = st.Spawn(KindScore, entity.Transform{}); err != nil {
		return nil, fmt.Errorf("arena: score: %w", err)
	}
	st.Commit()
	return g, nil
}

// teamGroup is the group of a team's players.
func teamGroup(team int) uint64 { return 1 << uint(team) }

// Store is the entity store the game writes, for the server loop.
func (g *Game) Store() *entity.Store { return g.st }

// Config is the game's configuration with defaults applied.
func (g *Game) Config() Config { return g.cfg }

// Players is the number of players in the arena.
func (g *Game) Players() int { return len(g.play) }

// Projectiles is the number of projectiles in flight.
func (g *Game) Projectiles() int { return len(g.shots) }

// Fired is the number of projectiles fired so far.
func (g *Game) Fired() uint64 { return g.fired }

// Hits is the number of hits scored so far.
func (g *Game) Hits() uint64 { return g.hits }

// Team is the team of the player in slot.
func (g *Game) Team(slot int) (int, bool) {
	p, ok := g.slots[slot]
	if !ok {
		return 0, false
	}
	return p.team, true
}

// Beacon is a team's beacon.
func (g *Game) Beacon(team int) entity.ID { return g.beacons[team] }

// Score is the score's entity.
func (g *Game) Score() entity.ID { return g.score }

// Avatar returns the entity of the player in slot.
func (g *Game) Avatar(slot int) (entity.ID, bool) {
	p, ok := g.slots[slot]
	if !ok {
		return entity.None, false
	}
	return p.id, true
}

// spawnPoint is the i-th of eight points on a circle around the middle of the arena.
func (g *Game) spawnPoint(i int) [3]float32 {
	a := float64(i%8) * math.Pi / 4
	r := float64(g.cfg.HalfExtent) / 4
	return [3]float32{float32(r * math.Cos(a)), float32(r * math.Sin(a)), 0}
}

// Join spawns the player's avatar at the next spawn point, in the team with fewer players, and
// its marker, which only the player sees.
func (g *Game) Join(p game.Player) (entity.ID, error) {
	if len(g.play) >= g.cfg.MaxPlayers {
		return entity.None, game.Refuse(protocol.CloseStalled, "the arena is full")
	}
	pos := g.spawnPoint(g.next)
	g.next++
	team := Red
	if g.teams[Blue] < g.teams[Red] {
		team = Blue
	}
	id, err := g.st.Spawn(KindPlayer, entity.Transform{Pos: pos})
	if err != nil {
		return entity.None, game.Refuse(protocol.CloseStalled, err.Error())
	}
	marker, err := g.st.Spawn(KindMarker, entity.Transform{Pos: pos})
	if err == nil {
		err = errors.Join(g.st.SetFloat(id, g.f.health, 100), g.st.SetEnum(id, g.f.team, team),
			g.st.SetVisibility(marker, entity.Visibility{OwnerOnly: true, Owner: p.Slot}))
	}
	if err != nil {
		_ = g.st.Despawn(id)
		_ = g.st.Despawn(marker)
		return entity.None, game.Refuse(protocol.CloseStalled, err.Error())
	}
	pl := &player{slot: p.Slot, id: id, marker: marker, team: team, health: 100, x: entity.Transform{Pos: pos}}
	g.play = append(g.play, pl)
	g.slots[p.Slot] = pl
	g.teams[team]++
	return id, nil
}

// Leave removes the player's avatar; its projectiles fly on.
func (g *Game) Leave(p game.Player, _ game.Leave) {
	pl, ok := g.slots[p.Slot]
	if !ok {
		return
	}
	delete(g.slots, p.Slot)
	for i, q := range g.play {
		if q == pl {
			g.play = append(g.play[:i], g.play[i+1:]...)
			break
		}
	}
	for i := range g.shots {
		if g.shots[i].owner == pl {
			g.shots[i].owner = nil
		}
	}
	g.teams[pl.team]--
	_ = g.st.Despawn(pl.id)
	_ = g.st.Despawn(pl.marker)
}

// Input takes a walk or a fire; the step carries it out.
func (g *Game) Input(p game.Player, in game.Input) {
	pl, ok := g.slots[p.Slot]
	if !ok {
		return
	}
	op, x, y, err := DecodeInput(in.Payload)
	if err != nil {
		return
	}
	switch op {
	case InputWalk:
		h := g.cfg.HalfExtent
		pl.target = [2]float32{clamp(x, -h, h), clamp(y, -h, h)}
		pl.walking = true
		_ = g.st.Set(pl.marker, &entity.Transform{Pos: [3]float32{pl.target[0], pl.target[1], 0}})
	case InputFire:
		if pl.cooldown <= 0 {
			pl.fire, pl.fireYaw = true, x
		}
	}
}

// Step moves the projectiles in flight and scores their hits, then moves the players and fires
// the shots asked for: a projectile is first seen where it was fired from.
func (g *Game) Step(t *game.Tick) {
	g.stepMatch(t)
	dt := t.Dt
	for i := 0; i < len(g.shots); {
		if g.fly(&g.shots[i], dt) {
			_ = g.st.Set(g.shots[i].id, &g.shots[i].x)
			i++
			continue
		}
		_ = g.st.Despawn(g.shots[i].id)
		g.shots[i] = g.shots[len(g.shots)-1]
		g.shots = g.shots[:len(g.shots)-1]
	}
	for _, pl := range g.play {
		if !pl.grouped {
			pl.grouped = t.SetGroups(pl.slot, teamGroup(pl.team)) == nil
		}
		pl.cooldown = max(0, pl.cooldown-dt)
		if pl.walking && g.walk(pl, dt) {
			_ = g.st.Set(pl.id, &pl.x)
		}
		if pl.fire {
			pl.fire = false
			g.shoot(pl)
		}
	}
}

// walk moves a player toward its target; it reports whether the player's transform changed.
func (g *Game) walk(pl *player, dt float32) bool {
	dx, dy := pl.target[0]-pl.x.Pos[0], pl.target[1]-pl.x.Pos[1]
	dist := float32(math.Hypot(float64(dx), float64(dy)))
	step := g.cfg.PlayerSpeed * dt
	if dist <= step {
		pl.x.Pos[0], pl.x.Pos[1] = pl.target[0], pl.target[1]
		pl.x.Vel = [3]float32{}
		pl.walking = false
		return true
	}
	ux, uy := dx/dist, dy/dist
	pl.x.Pos[0] += ux * step
	pl.x.Pos[1] += uy * step
	pl.x.Vel = [3]float32{ux * g.cfg.PlayerSpeed, uy * g.cfg.PlayerSpeed, 0}
	pl.x.Rot = protocol.YawRotation(math.Atan2(float64(uy), float64(ux)))
	return true
}

// shoot spawns a projectile a meter in front of the player, toward its fire yaw.
func (g *Game) shoot(pl *player) {
	if len(g.shots) == cap(g.shots) {
		return
	}
	s, c := math.Sincos(float64(pl.fireYaw))
	dir := [2]float32{float32(c), float32(s)}
	v := g.cfg.ProjectileSpeed
	x := entity.Transform{
		Pos: [3]float32{pl.x.Pos[0] + dir[0], pl.x.Pos[1] + dir[1], 1},
		Vel: [3]float32{dir[0] * v, dir[1] * v, 0},
		Rot: protocol.YawRotation(float64(pl.fireYaw)),
	}
	id, err := g.st.Spawn(KindProjectile, x)
	if err != nil {
		return
	}
	_ = g.st.SetEnum(id, g.f.shotTeam, pl.team)
	pl.cooldown = g.cfg.FireCooldownSec
	g.fired++
	g.shots = append(g.shots, shot{id: id, team: pl.team, owner: pl, x: x, life: g.cfg.ProjectileLifeSec})
}

// fly moves a projectile; it reports whether the projectile is still in flight: not expired, in
// the arena, and not on a player of the other team, which it hits.
func (g *Game) fly(s *shot, dt float32) bool {
	if s.life -= dt; s.life <= 0 {
		return false
	}
	s.x.Pos[0] += s.x.Vel[0] * dt
	s.x.Pos[1] += s.x.Vel[1] * dt
	h := g.cfg.HalfExtent
	if abs(s.x.Pos[0]) > h || abs(s.x.Pos[1]) > h {
		return false
	}
	r2 := g.cfg.HitRadius * g.cfg.HitRadius
	for _, pl := range g.play {
		if pl.team == s.team {
			continue
		}
		if dx, dy := pl.x.Pos[0]-s.x.Pos[0], pl.x.Pos[1]-s.x.Pos[1]; dx*dx+dy*dy <= r2 {
			g.hit(s, pl)
			return false
		}
	}
	return true
}

// hit scores a projectile's hit on a player: the shooter's hits and its team's score go up, the
// victim loses health, and respawns with all of it when it has none left.
func (g *Game) hit(s *shot, pl *player) {
	g.hits++
	if s.owner != nil {
		s.owner.hits++
		_ = g.st.SetUint(s.owner.id, g.f.hits, uint64(s.owner.hits)&0xffff)
	}
	g.scores[s.team]++
	_ = g.st.SetUint(g.score, g.f.red, g.scores[Red]&(1<<20-1))
	_ = g.st.SetUint(g.score, g.f.blue, g.scores[Blue]&(1<<20-1))
	if pl.health -= HitDamage; pl.health <= 0 {
		pl.health = 100
		pl.x.Pos = g.spawnPoint(pl.slot)
		pl.walking = false
		_ = g.st.Set(pl.id, &pl.x)
	}
	_ = g.st.SetFloat(pl.id, g.f.health, pl.health)
	_ = g.st.Bump(pl.id, HitBump)
}

func clamp(v, lo, hi float32) float32 { return max(lo, min(hi, v)) }

func abs(v float32) float32 { return float32(math.Abs(float64(v))) }
