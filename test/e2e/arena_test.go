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
	// despawn.
	projectiles, gone map[uint16]bool
	snap              protocol.Snapshot
}

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
	return &player{host: h, peer: p, cl: client.New(), projectiles: map[uint16]bool{}, gone: map[uint16]bool{}}
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
			if typ, _ := protocol.PeekType(msg); typ == protocol.MsgSnapshot && protocol.DecodeSnapshot(msg, &p.snap) == nil {
				for _, r := range p.snap.Records {
					switch {
					case r.Op == protocol.OpSpawn && r.Kind == uint8(arena.KindProjectile):
						p.projectiles[r.ID] = true
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

// playersAt reports whether the view holds exactly the given players, each at its point (as
// quantized on the wire), at rest, and no projectile.
func playersAt(cl *client.Client, at [][2]float32) error {
	want := map[[2]int32]bool{}
	for _, p := range at {
		want[[2]int32{protocol.QuantizePos(p[0]), protocol.QuantizePos(p[1])}] = true
	}
	var err error
	players := 0
	cl.Range(func(e client.Entity) bool {
		if cur, ok := cl.Entity(e.ID); !ok || cur != e {
			return true // freed by a reset, or not the current state
		}
		switch {
		case e.Kind == uint8(arena.KindProjectile):
			err = fmt.Errorf("projectile %d still in view", e.ID)
		case e.Kind != uint8(arena.KindPlayer):
			err = fmt.Errorf("entity %d of kind %d", e.ID, e.Kind)
		case !want[[2]int32{e.State.Pos[0], e.State.Pos[1]}] || e.State.Vel != [3]int16{}:
			err = fmt.Errorf("player %d at %v moving %v", e.ID, e.State.Pos, e.State.Vel)
		default:
			players++
		}
		return err == nil
	})
	if err == nil && players != len(at) {
		err = fmt.Errorf("%d players in view, want %d", players, len(at))
	}
	return err
}

// TestArenaFleet runs the example game in the Fleet of examples/arena/fleet.yaml, with state
// updates at 10 Hz: real ENet clients
// join one of its servers, walk and fire; every client sees every projectile spawn and despawn,
// and once the arena rests, every view holds exactly the players where they walked to.
func TestArenaFleet(t *testing.T) {
	ns := newNamespace(t, "arena")
	// The Fleet the game's docs give, with an admin port of the test's: every Pod has a loopback
	// address of its own here, but other tests' servers may use the default port.
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
	serviceUntil("every view holds the players at rest where they walked to", func() error {
		for i, p := range players {
			if err := playersAt(p.cl, targets); err != nil {
				return fmt.Errorf("player %d: %w", i, err)
			}
		}
		return nil
	})
	for i, p := range players {
		if len(p.projectiles) != 9 || len(p.gone) != 9 {
			t.Errorf("player %d saw %d projectiles spawn and %d despawn, want 9 and 9", i, len(p.projectiles), len(p.gone))
		}
		if st := p.cl.Stats(); st.Malformed != 0 || st.RecordsApplied == 0 {
			t.Errorf("player %d: %+v", i, st)
		}
	}
}
