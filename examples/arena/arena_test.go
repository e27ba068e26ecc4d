package arena

import (
	"errors"
	"math"
	"testing"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

const dt = 1.0 / 60

func mustNew(t testing.TB, cfg Config) *Game {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// step runs one tick as the server loop does: Advance, Step, Commit.
func step(g *Game) {
	st := g.Store()
	st.Advance()
	tk := game.NewTick(st.Tick(), dt, st, nil)
	g.Step(&tk)
	st.Commit()
}

func join(t testing.TB, g *Game, slot int) entity.ID {
	t.Helper()
	id, err := g.Join(game.Player{Slot: slot})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func input(g *Game, slot int, payload []byte) {
	g.Input(game.Player{Slot: slot}, game.Input{Payload: payload})
}

func position(g *Game, id entity.ID) [3]float32 {
	x, _ := g.Store().Get(id)
	return x.Pos
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{HalfExtent: -1}, {HalfExtent: 5000}, {MaxPlayers: -1}, {MaxPlayers: 5000}, {PlayerSpeed: -1},
		{ProjectileLifeSec: float32(math.NaN())}, {FireCooldownSec: -0.1}, {HitRadius: float32(math.Inf(1))},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
	g := mustNew(t, Config{})
	if c := g.Config(); c.HalfExtent != 100 || c.MaxPlayers != 32 || c.ProjectileSpeed != 30 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if want := 2*32 + 32*7 + 3; g.Store().Capacity() != want {
		t.Fatalf("store of %d slots, want %d (players, their markers and projectiles in flight, two beacons, the score)", g.Store().Capacity(), want)
	}
}

// TestJoinAndLeave: players join at distinct spawn points until the arena is full, which refuses
// with 1013; a player that leaves takes its avatar, and its slot can join again.
func TestJoinAndLeave(t *testing.T) {
	g := mustNew(t, Config{MaxPlayers: 3})
	seen := map[[3]float32]bool{}
	for slot := range 3 {
		id := join(t, g, slot)
		if k, _ := g.Store().KindOf(id); k != KindPlayer || seen[position(g, id)] {
			t.Fatalf("player %d: kind %d at %v", slot, k, position(g, id))
		}
		seen[position(g, id)] = true
	}
	_, err := g.Join(game.Player{Slot: 9})
	if game.CloseCode(err) != protocol.CloseStalled {
		t.Fatalf("join of a full arena: %v", err)
	}
	a, _ := g.Avatar(1)
	g.Leave(game.Player{Slot: 1}, game.Leave{})
	if g.Store().Valid(a) || g.Players() != 2 {
		t.Fatalf("after a leave: avatar valid %v, %d players", g.Store().Valid(a), g.Players())
	}
	if _, ok := g.Avatar(1); ok {
		t.Fatal("the player that left still has an avatar")
	}
	join(t, g, 1)
	g.Leave(game.Player{Slot: 42}, game.Leave{}) // never joined: nothing happens
	if g.Players() != 3 {
		t.Fatalf("%d players", g.Players())
	}
}

// TestWalk: a player walks to its target at PlayerSpeed, clamped to the arena, and stops there
// exactly; what it did is in the store once committed.
func TestWalk(t *testing.T) {
	g := mustNew(t, Config{})
	id := join(t, g, 0)
	start := position(g, id)
	input(g, 0, AppendWalk(nil, 500, start[1])) // beyond the arena's edge at 100
	step(g)
	if moved := position(g, id)[0] - start[0]; math.Abs(float64(moved-6*dt)) > 1e-4 {
		t.Fatalf("moved %v m in a tick, want %v", moved, 6*dt)
	}
	if g.Store().Metas()[id.Slot()].Changed != g.Store().Tick() {
		t.Fatal("the walk did not reach the store")
	}
	for range 60 * 30 {
		step(g)
	}
	x, _ := g.Store().Get(id)
	if x.Pos[0] != 100 || x.Pos[1] != start[1] || x.Vel != [3]float32{} {
		t.Fatalf("after walking: %+v, want at the edge (100, %v) and at rest", x, start[1])
	}
	tick := g.Store().Tick()
	step(g)
	if g.Store().Metas()[id.Slot()].Changed == g.Store().Tick() || g.Store().Metas()[id.Slot()].Changed > tick {
		t.Fatal("a player at rest changed")
	}
}

// TestFireAndExpire: a fire spawns a projectile in the step that follows, a second fire within
// the cooldown is ignored, and the projectile despawns when its life is over.
func TestFireAndExpire(t *testing.T) {
	g := mustNew(t, Config{ProjectileLifeSec: 0.5, FireCooldownSec: 0.2})
	join(t, g, 0)
	input(g, 0, AppendFire(nil, math.Pi/2))
	step(g)
	if g.Projectiles() != 1 {
		t.Fatalf("%d projectiles after a fire", g.Projectiles())
	}
	p := g.shots[0].id
	if k, _ := g.Store().KindOf(p); k != KindProjectile || g.Store().Metas()[p.Slot()].Changed != g.Store().Tick() {
		t.Fatal("the projectile is not in the store, spawned this tick")
	}
	input(g, 0, AppendFire(nil, 0)) // within the cooldown
	step(g)
	if g.Projectiles() != 1 {
		t.Fatalf("%d projectiles after a fire within the cooldown", g.Projectiles())
	}
	y0 := position(g, p)[1]
	step(g)
	if dy := position(g, p)[1] - y0; math.Abs(float64(dy-30*dt)) > 1e-3 {
		t.Fatalf("the projectile flew %v m in a tick, want %v", dy, 30*dt)
	}
	for range 30 {
		step(g)
	}
	if g.Projectiles() != 0 || g.Store().Valid(p) {
		t.Fatalf("after its life: %d projectiles, valid %v", g.Projectiles(), g.Store().Valid(p))
	}
}

// TestHit: a projectile that reaches another player despawns, scores a hit and bumps the victim;
// it never hits its shooter, and it flies on when its shooter leaves.
func TestHit(t *testing.T) {
	g := mustNew(t, Config{})
	join(t, g, 0)
	victim := join(t, g, 1)
	from, to := position(g, mustAvatar(t, g, 0)), position(g, victim)
	input(g, 0, AppendFire(nil, float32(math.Atan2(float64(to[1]-from[1]), float64(to[0]-from[0])))))
	bumped := false
	for range 120 {
		step(g)
		for _, b := range g.Store().Bumps() {
			bumped = bumped || (b.Slot == victim.Slot() && b.Amount == HitBump)
		}
		if g.Hits() > 0 {
			break
		}
	}
	if g.Hits() != 1 || !bumped || g.Projectiles() != 0 || g.slots[0].hits != 1 {
		t.Fatalf("hits %d, victim bumped %v, %d projectiles, shooter's hits %d", g.Hits(), bumped, g.Projectiles(), g.slots[0].hits)
	}
	// The fields say it: the victim's health, the shooter's hits, the red team's score.
	st := g.Store()
	stride := st.Layout().Stride()
	fields := func(id entity.ID) []uint32 { return st.Fields()[int(id.Slot())*stride : int(id.Slot()+1)*stride] }
	if h := g.f.health.Layout().Float(fields(victim)); h != 100-HitDamage {
		t.Errorf("the victim's health %v, want %v", h, 100-HitDamage)
	}
	if n := g.f.hits.Layout().Uint(fields(mustAvatar(t, g, 0))); n != 1 {
		t.Errorf("the shooter's hits field %d", n)
	}
	if r, b := g.f.red.Layout().Uint(fields(g.Score())), g.f.blue.Layout().Uint(fields(g.Score())); r != 1 || b != 0 {
		t.Errorf("score %d to %d, want 1 to 0", r, b)
	}

	input(g, 1, AppendFire(nil, 0))
	step(g)
	g.Leave(game.Player{Slot: 1}, game.Leave{})
	step(g)
	if g.Projectiles() != 1 || g.shots[0].owner != nil {
		t.Fatal("a projectile whose shooter left stopped flying")
	}
}

func mustAvatar(t *testing.T, g *Game, slot int) entity.ID {
	t.Helper()
	id, ok := g.Avatar(slot)
	if !ok {
		t.Fatalf("no avatar in slot %d", slot)
	}
	return id
}

func TestInputDecoding(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		in   []byte
		kind int
		x, y float32
		err  error
	}{
		{"walk", AppendWalk(nil, 1.5, -2), InputWalk, 1.5, -2, nil},
		{"fire", AppendFire(nil, 3), InputFire, 3, 0, nil},
		{"empty", nil, 0, 0, 0, ErrBadInput},
		{"short walk", AppendWalk(nil, 1, 2)[:8], 0, 0, 0, ErrBadInput},
		{"long fire", append(AppendFire(nil, 1), 0), 0, 0, 0, ErrBadInput},
		{"unknown kind", []byte{9, 0, 0, 0, 0}, 0, 0, 0, ErrBadInput},
		{"NaN walk", AppendWalk(nil, nan, 0), 0, 0, 0, ErrBadInput},
		{"Inf fire", AppendFire(nil, float32(math.Inf(1))), 0, 0, 0, ErrBadInput},
	} {
		kind, x, y, err := DecodeInput(tc.in)
		if kind != tc.kind || x != tc.x || y != tc.y || !errors.Is(err, tc.err) {
			t.Errorf("%s: (%d, %v, %v, %v), want (%d, %v, %v, %v)", tc.name, kind, x, y, err, tc.kind, tc.x, tc.y, tc.err)
		}
	}
	// Bad input changes nothing.
	g := mustNew(t, Config{})
	id := join(t, g, 0)
	before := position(g, id)
	input(g, 0, AppendWalk(nil, nan, 5))
	input(g, 0, []byte{1, 2, 3})
	input(g, 7, AppendWalk(nil, 5, 5)) // no such player
	step(g)
	if position(g, id) != before || g.Projectiles() != 0 {
		t.Fatal("a bad input moved the player or fired")
	}
}

func FuzzInput(f *testing.F) {
	f.Add(AppendWalk(nil, 3, 4))
	f.Add(AppendFire(nil, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		g := mustNew(t, Config{MaxPlayers: 2})
		join(t, g, 0)
		join(t, g, 1)
		input(g, 0, p)
		for range 3 {
			step(g)
		}
		for _, pl := range g.play {
			for _, v := range pl.x.Pos {
				if math.IsNaN(float64(v)) || math.Abs(float64(v)) > float64(g.cfg.HalfExtent)+1 {
					t.Fatalf("input %x put a player at %v", p, pl.x.Pos)
				}
			}
		}
	})
}

// TestTeams: players join the team with fewer players, red first; each team's beacon is
// visible to that team's group only, a player's marker to that player only, and the score,
// which has no position, to everyone; a step puts each player in its team's group; a
// projectile never hits its own team.
func TestTeams(t *testing.T) {
	g := mustNew(t, Config{})
	for slot := range 3 {
		join(t, g, slot)
	}
	for slot, want := range []int{Red, Blue, Red} {
		if team, _ := g.Team(slot); team != want {
			t.Fatalf("player %d in team %d, want %d", slot, team, want)
		}
	}
	st := g.Store()
	vis := func(id entity.ID) *entity.Visibility { return &st.Visibilities()[id.Slot()] }
	redBeacon, blueBeacon := vis(g.Beacon(Red)), vis(g.Beacon(Blue))
	if !redBeacon.Visible(0, teamGroup(Red)) || redBeacon.Visible(1, teamGroup(Blue)) || !blueBeacon.Visible(1, teamGroup(Blue)) {
		t.Fatal("a beacon is visible to the other team")
	}
	marker := vis(g.slots[0].marker)
	if !marker.Visible(0, 0) || marker.Visible(2, teamGroup(Red)) {
		t.Fatal("a marker is visible to another player")
	}
	if !vis(g.Score()).Relevant() || !vis(g.Score()).Visible(5, 0) {
		t.Fatal("the score is not relevant to everyone")
	}
	players := &groupsRecorder{groups: map[int]uint64{}}
	tk := game.NewTick(st.Tick()+1, dt, st, players)
	st.Advance()
	g.Step(&tk)
	st.Commit()
	if players.groups[0] != teamGroup(Red) || players.groups[1] != teamGroup(Blue) || players.groups[2] != teamGroup(Red) {
		t.Fatalf("groups set %v", players.groups)
	}
	// Player 2 fires at its teammate, player 0: no hit.
	from, to := position(g, mustAvatar(t, g, 2)), position(g, mustAvatar(t, g, 0))
	input(g, 2, AppendFire(nil, float32(math.Atan2(float64(to[1]-from[1]), float64(to[0]-from[0])))))
	for range 120 {
		step(g)
	}
	if g.Hits() != 0 {
		t.Fatal("a projectile hit its own team")
	}
}

// groupsRecorder is the players of a Tick, noting the groups the game sets.
type groupsRecorder struct{ groups map[int]uint64 }

func (r *groupsRecorder) Follow(int, entity.ID) error { return nil }
func (r *groupsRecorder) Kick(int, uint32) error      { return nil }
func (r *groupsRecorder) SetGroups(slot int, groups uint64) error {
	r.groups[slot] = groups
	return nil
}
