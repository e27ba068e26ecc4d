package snapshot

import (
	"bytes"
	"testing"

	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/world"
)

// The harness connects sessions to clients in memory: a lossy, delaying, reordering link in each
// direction, driven tick by tick and seeded, so every run is the same.

const tickMs = 1000 / 60

type message struct {
	due  uint32 // tick it is delivered at
	data []byte
}

type link struct {
	sess   *Session
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
	w     *world.World
	links []*link
	cfg   Config
}

func newHarness(t testing.TB, wcfg world.Config, cfg Config) *harness {
	t.Helper()
	w, err := world.New(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, w: w, cfg: cfg}
}

func (h *harness) addLink(budget, loss, maxDelay int) *link {
	h.t.Helper()
	s, err := NewSession(h.w, h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	avatar, err := h.w.AddAvatar()
	if err != nil {
		h.t.Fatal(err)
	}
	s.SetFocus(avatar)
	l := &link{sess: s, cl: client.New(), frame: NewFrame(256 << 10), budget: budget, loss: loss, maxDelay: maxDelay,
		rng: uint64(len(h.links)) + 1}
	h.links = append(h.links, l)
	return l
}

// tick steps the world by dt and runs one tick of every link.
func (h *harness) tick(dt float32) {
	h.t.Helper()
	h.w.Step(dt)
	now := h.w.Tick()
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
		if err := l.sess.BuildFrame(l.budget, nowMs, l.frame); err != nil {
			h.t.Fatalf("BuildFrame: %v", err)
		}
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

// settle runs quiet ticks (nothing moves) until every link's client view equals the world
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

// diff reports how the link's client view differs from the world around its avatar: every
// entity within the interest radius must be in the view with the server's exact quantized state,
// and every entity of the view must exist in the world, with that state, within the exit radius.
func (h *harness) diff(l *link) []string {
	var problems []string
	x, y, _, ok := h.w.Position(l.sess.Focus())
	if !ok {
		return []string{"avatar gone"}
	}
	r := h.cfg.InterestRadius
	for _, hit := range h.w.Query(x, y, r, nil) {
		e, ok := l.cl.Entity(hit.Slot)
		switch {
		case !ok:
			problems = append(problems, "missing entity")
		case e.State != *h.w.State(hit.Slot) || e.Kind != uint8(h.w.KindOf(hit.Slot)):
			problems = append(problems, "entity differs")
		}
	}
	inExit := map[uint16]bool{}
	for _, hit := range h.w.Query(x, y, r*exitFactor, nil) {
		inExit[hit.Slot] = true
	}
	l.cl.Range(func(e client.Entity) bool {
		switch {
		case !inExit[e.ID]:
			problems = append(problems, "entity outside interest still in view")
		case e.State != *h.w.State(e.ID):
			problems = append(problems, "entity state differs")
		}
		return true
	})
	return problems
}
