package snapshot

import (
	"bytes"
	"slices"
	"testing"

	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// The harness connects views to clients in memory: a lossy, delaying, reordering link in each
// direction, driven tick by tick and seeded, so every run is the same. The entity store is either
// a bare one that the test writes itself (newStoreHarness: it puts entities where it wants them),
// or the demo game's busy world (newHarness), which moves, rests, spawns and despawns entities.

const tickMs = 1000 / 60

type message struct {
	due  uint32 // tick it is delivered at
	data []byte
}

type link struct {
	sess   *View
	last   FrameResult // of the last build
	cl     *client.Client
	frame  *Frame
	budget int
	// loss is the per-mille drop probability of snapshot packets and of ACKs; RESET messages are
	// reliable. Each message is delayed by 1..maxDelay ticks, so packets reorder.
	loss     int
	maxDelay int
	down, up []message
	rng      uint64
	ackBuf   []byte
	ack      protocol.Ack
	// skip, if set, says which ticks the session is not built in (as a rate lever skips them).
	skip func(tick uint32) bool
}

func (l *link) rand(n int) int {
	l.rng = l.rng*6364136223846793005 + 1442695040888963407
	return int((l.rng >> 33) % uint64(n))
}

func (l *link) delay(tick uint32) uint32 { return tick + 1 + uint32(l.rand(l.maxDelay)) }

type harness struct {
	t     testing.TB
	st    *entity.Store
	w     *demo.World // nil: the test writes the store
	sh    *Shared
	links []*link
	cfg   Config
}

// newHarness runs the views on the demo's busy world.
func newHarness(t testing.TB, wcfg demo.Config, cfg Config) *harness {
	t.Helper()
	w, err := demo.NewWorld(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, st: w.Store(), w: w, sh: NewShared(w.Store().Capacity()), cfg: cfg}
}

// newStoreHarness runs the views on a bare store, which the test writes.
func newStoreHarness(t testing.TB, scfg entity.Config, cfg Config) *harness {
	t.Helper()
	st, err := entity.NewStore(scfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, st: st, sh: NewShared(st.Capacity()), cfg: cfg}
}

// kindAvatar is the kind of the entities links follow in a bare store.
const kindAvatar entity.Kind = 1

func at(x, y float32) entity.Transform { return entity.Transform{Pos: [3]float32{x, y, 0}} }

// spawn puts an entity at (x, y) in the store.
func (h *harness) spawn(k entity.Kind, x, y float32) entity.ID {
	h.t.Helper()
	id, err := h.st.Spawn(k, at(x, y))
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

// place moves an entity to (x, y).
func (h *harness) place(id entity.ID, x, y float32) {
	h.t.Helper()
	if err := h.st.Set(id, new(at(x, y))); err != nil {
		h.t.Fatal(err)
	}
}

// view returns a new view of the harness's store.
func (h *harness) view(cfg Config) *View {
	h.t.Helper()
	v, err := NewView(h.st, h.sh, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// addLink adds a view and its client, following a new avatar: the demo world's, or one at the
// origin of a bare store.
func (h *harness) addLink(budget, loss, maxDelay int) *link {
	h.t.Helper()
	s := h.view(h.cfg)
	var avatar entity.ID
	if h.w != nil {
		var err error
		if avatar, err = h.w.AddAvatar(); err != nil {
			h.t.Fatal(err)
		}
	} else {
		avatar = h.spawn(kindAvatar, 0, 0)
	}
	s.SetFocus(avatar)
	l := &link{sess: s, cl: client.NewLayout(h.st.Layout()), frame: NewFrame(256 << 10), budget: budget, loss: loss, maxDelay: maxDelay,
		rng: uint64(len(h.links)) + 1}
	h.links = append(h.links, l)
	return l
}

// step runs one tick of the store: the demo world steps by dt, or a bare store commits what the
// test wrote.
func (h *harness) step(dt float32) {
	if h.w != nil {
		h.w.Step(dt)
		return
	}
	h.st.Advance()
	h.st.Commit()
}

// tick steps the store and runs one tick of every link.
func (h *harness) tick(dt float32) {
	h.t.Helper()
	h.step(dt)
	now := h.st.Tick()
	nowMs := int64(now) * tickMs
	for _, l := range h.links {
		if l.skip != nil && l.skip(now) {
			continue
		}
		l.up = deliver(l.up, now, func(b []byte) {
			if err := protocol.DecodeAck(b, &l.ack); err != nil {
				h.t.Fatalf("ack does not decode: %v", err)
			}
			if _, err := l.sess.HandleAck(&l.ack); err != nil {
				h.t.Fatalf("HandleAck: %v", err)
			}
		})
		res, err := l.sess.BuildFrame(l.budget, nowMs, l.frame)
		if err != nil {
			h.t.Fatalf("BuildFrame: %v", err)
		}
		l.last = res
		h.checkFrame(l)
		if r := l.frame.ResetMessage(); r != nil {
			l.down = append(l.down, message{l.delay(now), bytes.Clone(r)})
		}
		for i := range l.frame.Packets() {
			if l.rand(1000) >= l.loss {
				l.down = append(l.down, message{l.delay(now), bytes.Clone(l.frame.Packet(i))})
			}
		}
		l.down = deliver(l.down, now, func(b []byte) {
			if err := l.cl.HandleMessage(b, nowMs); err != nil {
				h.t.Fatalf("client refused a server message: %v", err)
			}
		})
		if l.cl.AckDue() {
			b, ok := l.cl.AppendAck(l.ackBuf[:0])
			if ok && l.rand(1000) >= l.loss {
				l.up = append(l.up, message{l.delay(now), bytes.Clone(b)})
			}
		}
	}
}

// checkFrame checks the frame's packets against the MTU and the budget.
func (h *harness) checkFrame(l *link) {
	h.t.Helper()
	f := l.frame
	if l.budget > 0 && f.Bytes() > l.budget {
		h.t.Fatalf("frame of %d bytes over a budget of %d", f.Bytes(), l.budget)
	}
	for i := range f.Packets() {
		p := f.Packet(i)
		if len(p) > h.cfg.MaxPacketBytes {
			h.t.Fatalf("packet of %d bytes over MaxPacketBytes %d", len(p), h.cfg.MaxPacketBytes)
		}
		last := p[protocol.SnapshotHeaderBytes-1]&protocol.FlagLast != 0
		if seq := uint16(p[9]) | uint16(p[10])<<8; seq != f.Seq(i) {
			h.t.Fatalf("packet %d has sequence %d, Seq says %d", i, seq, f.Seq(i))
		}
		if last != (i == f.Packets()-1) {
			h.t.Fatalf("packet %d of %d has FlagLast %v", i, f.Packets(), last)
		}
	}
}

func deliver(q []message, now uint32, fn func([]byte)) []message {
	kept := q[:0]
	for _, m := range q {
		if m.due <= now {
			fn(m.data)
		} else {
			kept = append(kept, m)
		}
	}
	return kept
}

// settle runs quiet ticks (nothing moves) until every link's client view equals the store
// around its avatar, or limit ticks; it returns the ticks it ran.
func (h *harness) settle(limit int) int {
	h.t.Helper()
	quiet := 0
	for ; quiet < limit; quiet++ {
		h.tick(0)
		done := true
		for _, l := range h.links {
			done = done && len(h.diff(l)) == 0
		}
		if done {
			break
		}
	}
	return quiet
}

// focusOf is the committed position of the entity v follows.
func (h *harness) focusOf(v *View) (x, y float32, ok bool) {
	id := v.Focus()
	if !h.st.Valid(id) {
		return 0, 0, false
	}
	m := h.st.Metas()[id.Slot()]
	return m.X, m.Y, true
}

// diff reports how the link's client view differs from the store around its avatar: every
// entity the view's audience may see within the interest radius, or relevant wherever it is, must
// be in the view with the server's exact quantized state and fields, and every entity of the view
// must exist in the store, with that state and those fields, within the exit radius or relevant,
// and visible to the audience.
func (h *harness) diff(l *link) []string {
	var problems []string
	x, y, ok := h.focusOf(l.sess)
	if !ok {
		return []string{"avatar gone"}
	}
	r := h.cfg.InterestRadius
	states, kinds, vis, metas := h.st.States(), h.st.Kinds(), h.st.Visibilities(), h.st.Metas()
	stride := h.st.Layout().Stride()
	visible := func(slot uint16) bool {
		return !metas[slot].Special || vis[slot].Visible(l.sess.player, l.sess.groups)
	}
	relevant := func(slot uint16) bool { return metas[slot].Special && vis[slot].Relevant() }
	same := func(e client.Entity) bool {
		if e.State != states[e.ID] || e.Kind != uint8(kinds[e.ID]) {
			return false
		}
		words := h.st.Layout().Kind(e.Kind).Words
		return slices.Equal(e.Fields, h.st.Fields()[int(e.ID)*stride:int(e.ID)*stride+words])
	}
	want := map[uint16]bool{}
	for _, hit := range h.st.Query(x, y, r, nil) {
		want[hit.Slot] = true
	}
	for _, slot := range h.st.AlwaysRelevant() {
		want[slot] = true
	}
	for slot := range want {
		if !visible(slot) {
			continue
		}
		e, ok := l.cl.Entity(slot)
		switch {
		case !ok:
			problems = append(problems, "missing entity")
		case !same(e):
			problems = append(problems, "entity differs")
		}
	}
	inExit := map[uint16]bool{}
	for _, hit := range h.st.Query(x, y, r*exitFactor, nil) {
		inExit[hit.Slot] = true
	}
	l.cl.Range(func(e client.Entity) bool {
		switch {
		case !metas[e.ID].Alive:
			problems = append(problems, "dead entity still in view")
		case !inExit[e.ID] && !relevant(e.ID):
			problems = append(problems, "entity outside interest still in view")
		case !visible(e.ID):
			problems = append(problems, "entity the audience may not see in view")
		case !same(e):
			problems = append(problems, "entity state differs")
		}
		return true
	})
	return problems
}
