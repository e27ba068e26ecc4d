//go:build linux

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/examples/arena"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// player is a real ENet client of an arena server.
type player struct {
	host *enet.Host
	peer enet.Peer
	cl   *client.Client
	ev   enet.Event
	buf  []byte
	up   bool
	down uint32 // the close code, once disconnected
	// projectiles are the projectile ids the player was sent a spawn of, and gone those it saw
	// despawn; kinds counts the spawns it was sent of each kind, beaconTeams the teams of the
	// beacons among them.
	projectiles, gone map[uint16]bool
	kinds             map[uint8]int
	beaconTeams       map[string]bool
	snap              protocol.Snapshot
}

// arenaLayout is the arena's schema, compiled, as its clients hold it.
var arenaLayout = arena.Schema().MustCompile()

func newPlayer(t *testing.T, addr netip.AddrPort) *player {
	t.Helper()
	h, err := enet.NewHost(enet.Config{Peers: 1, Channels: broadcast.Channels})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Destroy)
	p, err := h.Connect(addr, broadcast.Channels, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &player{host: h, peer: p, cl: client.NewLayout(arenaLayout), projectiles: map[uint16]bool{}, gone: map[uint16]bool{},
		kinds: map[uint8]int{}, beaconTeams: map[string]bool{}}
}

func (p *player) service(t *testing.T) {
	now := time.Now().UnixMilli()
	for {
		ok, err := p.host.Service(&p.ev, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		switch p.ev.Type {
		case enet.EventConnect:
			p.up = true
			_ = p.peer.Send(broadcast.ChannelReliable, p.cl.AppendHello(p.buf[:0]), enet.Reliable)
		case enet.EventDisconnect:
			p.down = max(p.ev.Data, 1)
		case enet.EventReceive:
			msg := p.ev.Packet.Bytes()
			if typ, _ := protocol.PeekType(msg); typ == protocol.MsgSnapshot && arenaLayout.DecodeSnapshot(msg, &p.snap) == nil {
				for _, r := range p.snap.Records {
					if r.Op == protocol.OpSpawn {
						p.kinds[r.Kind]++
					}
					switch {
					case r.Op == protocol.OpSpawn && r.Kind == uint8(arena.KindProjectile):
						p.projectiles[r.ID] = true
					case r.Op == protocol.OpSpawn && r.Kind == uint8(arena.KindBeacon):
						_, team := arenaLayout.Kind(r.Kind).Field("team").Enum(r.Fields)
						p.beaconTeams[team] = true
					case r.Op == protocol.OpDespawn && p.projectiles[r.ID]:
						p.gone[r.ID] = true
					}
				}
			}
			if err := p.cl.HandleMessage(msg, now); err != nil {
				t.Fatalf("client: %v", err)
			}
		}
	}
	if !p.up || p.down != 0 {
		return
	}
	if p.cl.AckDue() {
		if m, ok := p.cl.AppendAck(p.buf[:0]); ok {
			_ = p.peer.Send(broadcast.ChannelSnapshot, m, enet.Unreliable)
		}
	}
	if p.cl.PingDue(now) {
		_ = p.peer.Send(broadcast.ChannelSnapshot, p.cl.AppendPing(p.buf[:0], now), enet.Unreliable)
	}
}

func (p *player) command(t *testing.T, payload []byte) {
	t.Helper()
	m, err := p.cl.AppendCommand(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.peer.Send(broadcast.ChannelReliable, m, enet.Reliable); err != nil {
		t.Fatal(err)
	}
}

// restsAt reports whether the view holds exactly the given players, each at its point (as quantized
// on the wire) and at rest, the player's own marker at its point, one beacon, the score, and no
// projectile; it returns the team of the player, which its marker finds.
func restsAt(cl *client.Client, at [][2]float32, own [2]float32) (team string, err error) {
	q := func(p [2]float32) [2]int32 { return [2]int32{protocol.QuantizePos(p[0]), protocol.QuantizePos(p[1])} }
	want := map[[2]int32]bool{}
	for _, p := range at {
		want[q(p)] = true
	}
	counts := map[arenaKind]int{}
	cl.Range(func(e client.Entity) bool {
		if cur, ok := cl.Entity(e.ID); !ok || cur.Tick != e.Tick {
			return true // freed by a reset, or not the current state
		}
		pos := [2]int32{e.State.Pos[0], e.State.Pos[1]}
		switch k := arenaKind(e.Kind); k {
		case kindPlayer:
			counts[k]++
			if !want[pos] || e.State.Vel != [3]int16{} {
				err = fmt.Errorf("player %d at %v moving %v", e.ID, e.State.Pos, e.State.Vel)
			}
			if pos == q(own) {
				team, _ = e.Enum("team")
			}
		case kindMarker:
			counts[k]++
			if pos != q(own) {
				err = fmt.Errorf("a marker at %v, not the player's own at %v", e.State.Pos, own)
			}
		case kindBeacon, kindScore:
			counts[k]++
		default:
			err = fmt.Errorf("entity %d of kind %d still in view", e.ID, e.Kind)
		}
		return err == nil
	})
	if err == nil && (counts[kindPlayer] != len(at) || counts[kindMarker] != 1 || counts[kindBeacon] != 1 || counts[kindScore] != 1) {
		err = fmt.Errorf("view of %v; want %d players, their own marker, a beacon and the score", counts, len(at))
	}
	return team, err
}

type arenaKind uint8

const (
	kindPlayer = arenaKind(arena.KindPlayer)
	kindMarker = arenaKind(arena.KindMarker)
	kindBeacon = arenaKind(arena.KindBeacon)
	kindScore  = arenaKind(arena.KindScore)
)

// fieldsOf is what a view says of an entity that every player sees: its kind, state and fields.
func fieldsOf(cl *client.Client, id uint16) string {
	e, ok := cl.Entity(id)
	if !ok {
		return "absent"
	}
	return fmt.Sprint(e.Kind, e.State, e.Fields)
}

// arenaFleet is the Fleet the game's docs give (examples/arena/fleet.yaml) in namespace ns, with
// an admin port of the test's: every Pod has a loopback address of its own here, but other tests'
// servers may use the default port.
func arenaFleet(t *testing.T, ns string) *v1alpha1.Fleet {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, "examples/arena/fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := &v1alpha1.Fleet{}
	if err := yaml.UnmarshalStrict(raw, f); err != nil {
		t.Fatal(err)
	}
	f.Namespace = ns
	f.Spec.Template.Spec.AdminPort = randomPort(40000, 10000)
	return f
}

// TestArenaFleet runs the example game in the Fleet of examples/arena/fleet.yaml, with state
// updates at 10 Hz: real ENet clients
// join one of its servers, walk and fire; every client sees every projectile spawn and despawn,
// and once the arena rests, every view holds exactly the players where they walked to.
func TestArenaFleet(t *testing.T) {
	f := arenaFleet(t, newNamespace(t, "arena"))
	ns := f.Namespace
	if f.Spec.Template.Spec.Netcode.Budget.StateUpdateHz != 10 || f.Spec.Template.Spec.Template.Spec.Containers[0].Image != arenaImage+":dev" {
		t.Fatalf("examples/arena/fleet.yaml is not the 10 Hz arena Fleet: %+v", f.Spec.Template.Spec)
	}
	if err := env.k8s.Create(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	servers := waitConverged(t, ns, f.Name)
	addr := servers[0].game
	players := []*player{newPlayer(t, addr), newPlayer(t, addr), newPlayer(t, addr)}
	serviceUntil := func(what string, cond func() error) {
		t.Helper()
		waitFor(t, what, waitLimit, func() (bool, error) {
			for range 20 {
				for _, p := range players {
					p.service(t)
					if p.down != 0 {
						return false, fmt.Errorf("a player was disconnected with %d", p.down)
					}
				}
				time.Sleep(time.Millisecond)
			}
			err := cond()
			return err == nil, err
		})
	}
	serviceUntil("players joined and see each other", func() error {
		for i, p := range players {
			if !p.up || p.cl.Len() < len(players) {
				return fmt.Errorf("player %d: up %v, %d entities in view", i, p.up, p.cl.Len())
			}
		}
		return nil
	})
	targets := [][2]float32{{10, 20}, {-15, 5}, {30, -25}}
	for i, p := range players {
		p.command(t, arena.AppendWalk(nil, targets[i][0], targets[i][1]))
	}
	shots := 0
	serviceUntil("volleys fired", func() error {
		if shots < 9 {
			players[shots%len(players)].command(t, arena.AppendFire(nil, float32(shots)*0.7))
			shots++
			time.Sleep(50 * time.Millisecond)
			return fmt.Errorf("%d of 9 shots fired", shots)
		}
		return nil
	})
	teams := make([]string, len(players))
	serviceUntil("every view holds the players at rest where they walked to, with the same fields", func() error {
		for i, p := range players {
			var err error
			if teams[i], err = restsAt(p.cl, targets, targets[i]); err != nil {
				return fmt.Errorf("player %d: %w", i, err)
			}
		}
		// The players and the score are what every player sees: the views agree on them.
		var shared []uint16
		players[0].cl.Range(func(e client.Entity) bool {
			if k := arenaKind(e.Kind); k == kindPlayer || k == kindScore {
				shared = append(shared, e.ID)
			}
			return true
		})
		for _, id := range shared {
			for i, p := range players[1:] {
				if a, b := fieldsOf(players[0].cl, id), fieldsOf(p.cl, id); a != b {
					return fmt.Errorf("entity %d: player 0 holds %s, player %d %s", id, a, i+1, b)
				}
			}
		}
		return nil
	})
	for i, p := range players {
		if len(p.projectiles) != 9 || len(p.gone) != 9 {
			t.Errorf("player %d saw %d projectiles spawn and %d despawn, want 9 and 9", i, len(p.projectiles), len(p.gone))
		}
		// Never an entity it must not see: only its team's beacon, only its own marker.
		if len(p.beaconTeams) != 1 || !p.beaconTeams[teams[i]] || p.kinds[uint8(arena.KindMarker)] != 1 {
			t.Errorf("player %d of team %s was sent beacons of %v and %d markers", i, teams[i], p.beaconTeams, p.kinds[uint8(arena.KindMarker)])
		}
		if st := p.cl.Stats(); st.Malformed != 0 || st.RecordsApplied == 0 {
			t.Errorf("player %d: %+v", i, st)
		}
	}
	if teams[0] == teams[1] || teams[0] != teams[2] {
		t.Errorf("teams %v: players join the team with fewer players, red first", teams)
	}
}
