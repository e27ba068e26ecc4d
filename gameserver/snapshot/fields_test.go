package snapshot

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Kinds of the field tests' schema.
const (
	kindHero  entity.Kind = 1 // kindAvatar: the links follow heroes
	kindCrate entity.Kind = 2
	kindBoard entity.Kind = 3
)

// fieldSchema has heroes with the whole transform and four fields of 32 bits in all, crates with a
// position and a bool, and a scoreboard with no transform at all.
func fieldSchema() *protocol.Schema {
	return &protocol.Schema{Kinds: []protocol.KindSchema{
		{ID: uint8(kindHero), Name: "hero", Parts: protocol.Transform, Fields: []protocol.Field{
			protocol.Float("health", 0, 100, 0.5), protocol.Uint("ammo", 8), protocol.Enum("team", "red", "blue"),
			protocol.Int("score", 15),
		}},
		{ID: uint8(kindCrate), Name: "crate", Parts: protocol.PartPosition, Fields: []protocol.Field{protocol.Bool("open")}},
		{ID: uint8(kindBoard), Name: "board", Fields: []protocol.Field{protocol.Uint("red", 10), protocol.Uint("blue", 10)}},
	}}
}

// fieldWorld drives a store of fieldSchema: heroes walk and change their fields, crates open and
// close, the board counts.
type fieldWorld struct {
	h      *harness
	rng    *rand.Rand
	heroes []entity.ID
	crates []entity.ID
	board  entity.ID
	f      struct{ health, ammo, team, score, open, red, blue entity.Field }
}

func newFieldWorld(t *testing.T, cfg Config, heroes int) *fieldWorld {
	t.Helper()
	h := newStoreHarness(t, entity.Config{Capacity: 256, HalfExtent: 300, CellSize: 50, Schema: fieldSchema()}, cfg)
	w := &fieldWorld{h: h, rng: rand.New(rand.NewPCG(5, 6))}
	st := h.st
	w.f.health, w.f.ammo, w.f.team, w.f.score = st.MustField(kindHero, "health"), st.MustField(kindHero, "ammo"),
		st.MustField(kindHero, "team"), st.MustField(kindHero, "score")
	w.f.open, w.f.red, w.f.blue = st.MustField(kindCrate, "open"), st.MustField(kindBoard, "red"), st.MustField(kindBoard, "blue")
	for range heroes {
		w.heroes = append(w.heroes, h.spawn(kindHero, (w.rng.Float32()*2-1)*200, (w.rng.Float32()*2-1)*200))
	}
	for range 30 {
		w.crates = append(w.crates, h.spawn(kindCrate, (w.rng.Float32()*2-1)*200, (w.rng.Float32()*2-1)*200))
	}
	var err error
	if w.board, err = st.Spawn(kindBoard, entity.Transform{}); err != nil {
		t.Fatal(err)
	}
	h.step(0)
	return w
}

// change moves the heroes and changes the fields of about a quarter of the entities.
func (w *fieldWorld) change(t *testing.T) {
	st := w.h.st
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range w.heroes {
		x, _ := st.Get(id)
		x.Pos[0] = max(-290, min(290, x.Pos[0]+(w.rng.Float32()*2-1)*4))
		x.Pos[1] = max(-290, min(290, x.Pos[1]+(w.rng.Float32()*2-1)*4))
		must(st.Set(id, &x))
		if w.rng.IntN(4) == 0 {
			must(st.SetFloat(id, w.f.health, w.rng.Float64()*100))
			must(st.SetUint(id, w.f.ammo, uint64(w.rng.IntN(256))))
			must(st.SetEnum(id, w.f.team, w.rng.IntN(2)))
			must(st.SetInt(id, w.f.score, int64(w.rng.IntN(32768)-16384)))
		}
	}
	for _, id := range w.crates {
		if w.rng.IntN(8) == 0 {
			must(st.SetBool(id, w.f.open, w.rng.IntN(2) == 0))
		}
	}
	if w.rng.IntN(10) == 0 {
		must(st.SetUint(w.board, w.f.red, uint64(w.rng.IntN(1024))))
		must(st.SetUint(w.board, w.f.blue, uint64(w.rng.IntN(1024))))
	}
}

// TestFieldsConverge: views of a schema with fields, over lossy, delaying links and under budgets,
// bring their clients to the store's exact states and fields, the scoreboard (no transform)
// included; once everything rests, a tick sends nothing.
func TestFieldsConverge(t *testing.T) {
	w := newFieldWorld(t, testConfig(), 40)
	h := w.h
	links := []*link{h.addLink(0, 0, 1), h.addLink(2400, 100, 4), h.addLink(600, 250, 6)}
	for range 600 {
		w.change(t)
		h.tick(dt)
	}
	if quiet := h.settle(2000); quiet == 2000 {
		for i, l := range links {
			if d := h.diff(l); len(d) > 0 {
				t.Fatalf("link %d did not converge: %d problems, first %q", i, len(d), d[0])
			}
		}
	}
	for i, l := range links {
		if _, ok := l.cl.Entity(w.board.Slot()); !ok {
			t.Errorf("link %d has no scoreboard", i)
		}
		var fielded int
		l.cl.Range(func(e client.Entity) bool {
			if _, ok := e.Float("health"); ok {
				fielded++
			}
			return true
		})
		t.Logf("link %d: view %d, %d with fields; view stats %+v", i, l.cl.Len(), fielded, l.sess.Stats())
		if fielded == 0 {
			t.Errorf("link %d holds no hero with fields", i)
		}
	}
	for range 3 {
		h.tick(0)
		for i, l := range links {
			if l.frame.Bytes() != 0 {
				t.Fatalf("link %d: an idle tick sent %d bytes", i, l.frame.Bytes())
			}
		}
	}
}

// TestDeltaCarriesOnlyChangedFields: a delta of an entity whose one field changed carries that
// field and the transform it changed with, and nothing of the other fields.
func TestDeltaCarriesOnlyChangedFields(t *testing.T) {
	w := newFieldWorld(t, testConfig(), 2)
	h := w.h
	l := h.addLink(0, 0, 1)
	if h.settle(200) == 200 {
		t.Fatal("did not settle")
	}
	hero := l.sess.Focus() // a hero, at the middle of the view
	if err := h.st.SetUint(hero, w.f.ammo, 42); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	var snap protocol.Snapshot
	layout := h.st.Layout()
	found := false
	for i := range l.frame.Packets() {
		pkt := l.frame.Packet(i)
		if err := layout.DecodeSnapshot(pkt, &snap); err != nil {
			t.Fatal(err)
		}
		for _, r := range snap.Records {
			if r.ID != hero.Slot() {
				continue
			}
			found = true
			kl := layout.Kind(uint8(kindHero))
			if r.Op != protocol.OpDelta || r.Delta.Changed != 0 || r.FieldsBits != len(kl.Fields)+kl.Field("ammo").Width {
				t.Fatalf("record %+v: want a delta of the ammo field alone (%d bits)", r, len(kl.Fields)+kl.Field("ammo").Width)
			}
		}
	}
	if !found {
		t.Fatal("no record of the hero whose ammo changed")
	}
	h.tick(0)
	if e, _ := l.cl.Entity(hero.Slot()); func() uint64 { v, _ := e.Uint("ammo"); return v }() != 42 {
		t.Fatal("the client does not hold the new ammo")
	}
}

// TestVisibility: hidden entities never reach a client; a group's entities reach only the views of
// players in the group, and leave when a player leaves it; an owner's entity reaches its owner
// only; an entity relevant wherever it is, and a kind without a position, reach every view they
// may, far beyond the radius.
func TestVisibility(t *testing.T) {
	cfg := testConfig()
	cfg.InterestRadius = 100
	w := newFieldWorld(t, cfg, 0)
	h := w.h
	st := h.st
	red, blue := h.addLink(0, 0, 1), h.addLink(0, 0, 1)
	red.sess.SetAudience(0, 1<<0)
	blue.sess.SetAudience(1, 1<<1)
	spawn := func(x, y float32, v entity.Visibility) entity.ID {
		id := h.spawn(kindCrate, x, y)
		if err := st.SetVisibility(id, v); err != nil {
			t.Fatal(err)
		}
		return id
	}
	hidden := spawn(10, 0, entity.Visibility{Hidden: true})
	redOnly := spawn(20, 0, entity.Visibility{Groups: 1 << 0})
	blueOwned := spawn(30, 0, entity.Visibility{OwnerOnly: true, Owner: 1})
	far := spawn(280, 280, entity.Visibility{Always: true})
	farRed := spawn(-280, 280, entity.Visibility{Always: true, Groups: 1 << 0})
	if err := st.SetVisibility(hidden, entity.Visibility{Hidden: true, Scale: 17}); err == nil {
		t.Fatal("a relevance scale of 17 was accepted")
	}
	has := func(l *link, id entity.ID) bool { _, ok := l.cl.Entity(id.Slot()); return ok }
	check := func(when string, l *link, want map[entity.ID]bool) {
		t.Helper()
		for id, in := range want {
			if has(l, id) != in {
				t.Errorf("%s: view %d holds %v: %v, want %v", when, l.sess.player, id, has(l, id), in)
			}
		}
		if d := h.diff(l); len(d) > 0 {
			t.Errorf("%s: view %d: %d problems, first %q", when, l.sess.player, len(d), d[0])
		}
	}
	h.settle(300)
	check("at first", red, map[entity.ID]bool{hidden: false, redOnly: true, blueOwned: false, far: true, farRed: true, w.board: true})
	check("at first", blue, map[entity.ID]bool{hidden: false, redOnly: false, blueOwned: true, far: true, farRed: false, w.board: true})

	// Red's player changes sides; the hidden crate is shown, the far one hidden.
	red.sess.SetAudience(0, 1<<1)
	if err := st.SetVisibility(hidden, entity.Visibility{}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetVisibility(far, entity.Visibility{Hidden: true}); err != nil {
		t.Fatal(err)
	}
	h.settle(300)
	check("after the changes", red, map[entity.ID]bool{hidden: true, redOnly: false, farRed: false, far: false, w.board: true})
	check("after the changes", blue, map[entity.ID]bool{hidden: true, redOnly: false, blueOwned: true, far: false})
}

// TestRelevanceScale: under a budget that sends one entity's update a tick, an entity whose
// relevance is scaled up is updated more often than its peers at the same distance.
func TestRelevanceScale(t *testing.T) {
	cfg := testConfig()
	cfg.InterestRadius = 100
	w := newFieldWorld(t, cfg, 0)
	h := w.h
	var crates []entity.ID
	for i := range 8 {
		crates = append(crates, h.spawn(kindCrate, 50*float32(math.Cos(float64(i))), 50*float32(math.Sin(float64(i)))))
	}
	if err := h.st.SetVisibility(crates[0], entity.Visibility{Scale: 8}); err != nil {
		t.Fatal(err)
	}
	l := h.addLink(protocol.SnapshotHeaderBytes+1+8, 0, 1)
	h.settle(600)
	sent := map[uint16]int{}
	var snap protocol.Snapshot
	for tick := range 400 {
		for _, id := range crates {
			if err := h.st.SetBool(id, w.f.open, tick%2 == 0); err != nil {
				t.Fatal(err)
			}
		}
		h.tick(0)
		for i := range l.frame.Packets() {
			if err := h.st.Layout().DecodeSnapshot(l.frame.Packet(i), &snap); err != nil {
				t.Fatal(err)
			}
			for _, r := range snap.Records {
				sent[r.ID]++
			}
		}
	}
	for _, id := range crates[1:] {
		if sent[crates[0].Slot()] < 3*sent[id.Slot()] {
			t.Fatalf("the scaled crate was sent %d times, crate %v %d times: want several times as often", sent[crates[0].Slot()], id, sent[id.Slot()])
		}
	}
}

// TestInputAck: once the game has applied a client's input, every packet names it.
func TestInputAck(t *testing.T) {
	h := newHarness(t, busyWorld(3), testConfig())
	l := h.addLink(0, 0, 1)
	h.tick(dt)
	if _, ok := l.cl.InputAck(); ok {
		t.Fatal("an input acknowledged before any input")
	}
	l.sess.AckInput(7)
	h.tick(dt)
	h.tick(dt)
	var snap protocol.Snapshot
	for i := range l.frame.Packets() {
		if err := protocol.DecodeSnapshot(l.frame.Packet(i), &snap); err != nil || snap.Flags&protocol.FlagInputAck == 0 || snap.InputSeq != 7 {
			t.Fatalf("packet %d: flags %#x, input %d (%v)", i, snap.Flags, snap.InputSeq, err)
		}
	}
	if seq, ok := l.cl.InputAck(); !ok || seq != 7 {
		t.Fatalf("the client holds input ack %d, %v", seq, ok)
	}
}

// TestInputAckIdle: inputs that change nothing are still acknowledged. A view with no record to
// send carries a new input acknowledgement in a packet of no records, sends it again until a
// packet that carried it is acknowledged, and then sends nothing.
func TestInputAckIdle(t *testing.T) {
	h := newStoreHarness(t, entity.Config{Capacity: 64, HalfExtent: 100}, testConfig())
	l := h.addLink(0, 0, 1)
	h.settle(100)
	for range 10 {
		h.tick(0)
	}
	if l.last.Packets != 0 {
		t.Fatalf("an idle view sends %d packets", l.last.Packets)
	}
	l.sess.AckInput(3)
	h.tick(0)
	if l.last.Packets != 1 || l.last.Records() != 0 {
		t.Fatalf("the frame after an input: %d packets, %d records; want one packet of none", l.last.Packets, l.last.Records())
	}
	var snap protocol.Snapshot
	if err := protocol.DecodeSnapshot(l.frame.Packet(0), &snap); err != nil || snap.Flags&protocol.FlagInputAck == 0 || snap.InputSeq != 3 {
		t.Fatalf("the packet: flags %#x, input %d (%v)", snap.Flags, snap.InputSeq, err)
	}
	for range 20 {
		h.tick(0)
	}
	if seq, ok := l.cl.InputAck(); !ok || seq != 3 {
		t.Fatalf("the client holds input ack %d, %v", seq, ok)
	}
	if l.last.Packets != 0 {
		t.Fatalf("an acknowledged input acknowledgement is still sent: %d packets", l.last.Packets)
	}

	// A lost packet of the acknowledgement is sent again.
	l.loss = 1000
	l.sess.AckInput(4)
	sent := 0
	for range 30 {
		h.tick(0)
		sent += l.last.Packets
	}
	if sent < 2 {
		t.Fatalf("an unacknowledged input acknowledgement went out %d times in 30 ticks", sent)
	}
	l.loss = 0
	for range 30 {
		h.tick(0)
	}
	if seq, _ := l.cl.InputAck(); seq != 4 {
		t.Fatalf("after the loss ended the client holds input ack %d", seq)
	}
	if l.last.Packets != 0 {
		t.Fatalf("still sending the acknowledgement: %d packets", l.last.Packets)
	}
}
