package cclient

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/netfleet/netfleet/examples/arena"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// streamModel is a server's side of one session, as the wire spec describes it, with no game: it
// spawns, changes, respawns and despawns entities of the arena's kinds, deltas each change
// against a state it sent (one the client may or may not hold), resets the view once, and
// acknowledges inputs.
type streamModel struct {
	rng    *rand.Rand
	layout *protocol.Layout
	enc    protocol.SnapshotEncoder
	buf    []byte
	seq    uint16
	msgs   [][]byte
	ents   []modelEntity
	header protocol.SnapshotHeader
}

type modelEntity struct {
	alive  bool
	kind   uint8
	state  protocol.State
	fields []uint32
	// sent are the states of the current incarnation sent since its last spawn, by tick: the
	// baselines a delta may name.
	sent  map[uint32]modelState
	ticks []uint32
}

type modelState struct {
	state  protocol.State
	fields []uint32
}

var modelKinds = []uint8{uint8(arena.KindPlayer), uint8(arena.KindProjectile), uint8(arena.KindScore)}

func (m *streamModel) begin(tick uint32, flags uint8) {
	m.header = protocol.SnapshotHeader{Tick: tick, ServerTimeMs: tick * 16, Seq: m.seq, Flags: flags | protocol.FlagInputAck, InputSeq: uint16(tick / 3)}
	m.seq++
	m.enc.Begin(m.buf, &m.header)
}

func (m *streamModel) flush() { m.msgs = append(m.msgs, bytes.Clone(m.enc.Finish())) }

// write writes a record with rec, in a new packet of the same tick if this one is full.
func (m *streamModel) write(t *testing.T, rec func() bool) {
	if rec() {
		return
	}
	m.flush()
	m.begin(m.header.Tick, m.header.Flags&^protocol.FlagInputAck)
	if !rec() {
		t.Fatal("a record does not fit an empty packet")
	}
}

func (m *streamModel) remember(e *modelEntity, tick uint32) {
	e.sent[tick] = modelState{e.state, slices.Clone(e.fields)}
	e.ticks = append(e.ticks, tick)
}

// randomize gives entity e a new random state and fields of its kind.
func (m *streamModel) randomize(e *modelEntity, full bool) {
	k := m.layout.Kind(e.kind)
	parts := m.layout.Schema().Kinds
	var p protocol.Parts
	for _, ks := range parts {
		if ks.ID == e.kind {
			p = ks.Parts
		}
	}
	if p&protocol.PartPosition != 0 {
		for i := range 3 {
			d := int32(m.rng.IntN(9) - 4)
			if full || m.rng.IntN(8) == 0 {
				d = int32(m.rng.IntN(20001) - 10000)
			}
			e.state.Pos[i] = min(max(e.state.Pos[i]+d, protocol.PosMin), protocol.PosMax)
		}
	}
	if p&protocol.PartRotation != 0 && (full || m.rng.IntN(3) == 0) {
		if m.rng.IntN(2) == 0 {
			e.state.Rot = m.rng.Uint32()
		} else {
			r := e.state.Rot &^ (1<<30 - 1)
			for i := range 3 {
				shift := uint(20 - 10*i)
				c := int32(e.state.Rot>>shift&1023) + int32(m.rng.IntN(7)-3)
				r |= uint32(min(max(c, 0), 1023)) << shift
			}
			e.state.Rot = r
		}
	}
	if p&protocol.PartVelocity != 0 && (full || m.rng.IntN(3) == 0) {
		for i := range 3 {
			e.state.Vel[i] = int16(m.rng.IntN(16384) - 8192)
		}
	}
	for fi := range k.Fields {
		f := &k.Fields[fi]
		if !full && m.rng.IntN(4) != 0 {
			continue
		}
		switch f.Type {
		case protocol.FieldFloat:
			_ = f.PutFloat(e.fields, float64(m.rng.IntN(101)))
		case protocol.FieldEnum:
			_ = f.PutEnum(e.fields, m.rng.IntN(2))
		case protocol.FieldUint:
			_ = f.PutUint(e.fields, uint64(m.rng.IntN(1<<16)))
		}
	}
}

func (m *streamModel) spawn(t *testing.T, id int, tick uint32) {
	e := &m.ents[id]
	e.sent, e.ticks = map[uint32]modelState{}, nil
	m.remember(e, tick)
	st, f := e.state, slices.Clone(e.fields)
	m.write(t, func() bool { return m.enc.Spawn(uint16(id), e.kind, &st, f) })
}

// buildImpairedStream is the session's messages, then lost, duplicated and reordered.
func buildImpairedStream(t *testing.T, seed uint64, entities, ticks int) [][]byte {
	m := &streamModel{rng: rand.New(rand.NewPCG(seed, 7)), layout: arena.Schema().MustCompile(), buf: make([]byte, 1200)}
	m.enc.SetLayout(m.layout)
	m.ents = make([]modelEntity, entities)
	stride := m.layout.Stride()
	resetAt := uint32(ticks / 2)
	for tick := uint32(1); tick <= uint32(ticks); tick++ {
		var flags uint8
		if tick == resetAt {
			flags = protocol.FlagReset
		}
		m.begin(tick, flags)
		for id := range m.ents {
			e := &m.ents[id]
			switch {
			case !e.alive && (tick == 1 || m.rng.IntN(60) == 0):
				e.alive, e.kind = true, modelKinds[m.rng.IntN(len(modelKinds))]
				e.state, e.fields = protocol.State{}, make([]uint32, stride)
				m.randomize(e, true)
				m.spawn(t, id, tick)
			case e.alive && m.rng.IntN(150) == 0:
				e.alive = false
				m.write(t, func() bool { return m.enc.Despawn(uint16(id)) })
			case e.alive && (tick == resetAt || m.rng.IntN(40) == 0):
				m.randomize(e, false)
				m.spawn(t, id, tick) // full state again: after a reset, or as if asked for
			case e.alive && m.rng.IntN(10) < 7:
				// A change, against one of the last states sent within the baseline window.
				var recent []uint32
				for i := len(e.ticks) - 1; i >= 0 && len(recent) < 20; i-- {
					if tick-e.ticks[i] <= protocol.MaxBaselineAge {
						recent = append(recent, e.ticks[i])
					}
				}
				if len(recent) == 0 {
					continue
				}
				window := 3 // mostly a recent state, sometimes one the client may have evicted
				if m.rng.IntN(5) == 0 {
					window = 20
				}
				bt := recent[m.rng.IntN(min(len(recent), window))]
				base := e.sent[bt]
				m.randomize(e, false)
				st, f := e.state, slices.Clone(e.fields)
				kind := e.kind
				m.write(t, func() bool {
					return m.enc.Delta(uint16(id), tick-bt, kind, &base.state, &st, base.fields, f)
				})
				m.remember(e, tick)
			}
		}
		m.flush()
		if tick == resetAt {
			reset := protocol.AppendReset(nil, &protocol.Reset{Tick: tick})
			m.msgs = append(m.msgs, reset)
		}
	}
	// Impair: lose 8% of the snapshots (never the reliable RESET), duplicate 2%, and move 10% up
	// to three places later.
	var out [][]byte
	for _, msg := range m.msgs {
		typ, _ := protocol.PeekType(msg)
		switch r := m.rng.IntN(100); {
		case typ == protocol.MsgSnapshot && r < 8:
		case typ == protocol.MsgSnapshot && r < 10:
			out = append(out, msg, msg)
		default:
			out = append(out, msg)
		}
	}
	for i := range out {
		if m.rng.IntN(10) == 0 {
			j := min(len(out)-1, i+1+m.rng.IntN(3))
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// cView is nfbench --dump's output.
type cView struct {
	Applied, Stale, Unapplied, Resets, Malformed uint64
	NeedFull                                     int  `json:"needFull"`
	Resync                                       bool `json:"resync"`
	InputAck                                     int  `json:"inputAck"`
	LastAppliedTick                              uint32
	Ack                                          string `json:"ack"`
	Entities                                     []struct {
		viewEntity
		Tick uint32 `json:"tick"`
	} `json:"entities"`
}

// TestCMatchesGoClientOnImpairedStream feeds the C client (nfbench --dump) and the Go client the
// same session's messages, with packets lost, duplicated and reordered, a reset, respawns,
// despawns and deltas against baselines each client may lack: both must end with the same view
// (every entity's kind, newest tick, state and fields), the same counters of applied, stale and
// unapplied records and resets, the same NeedFull, input acknowledgement and last ACK.
func TestCMatchesGoClientOnImpairedStream(t *testing.T) {
	if out, err := exec.Command("make", "--no-print-directory", "bench").CombinedOutput(); err != nil {
		t.Fatalf("make bench: %v\n%s", err, out)
	}
	dir := t.TempDir()
	schemaJSON, err := json.Marshal(arena.Schema())
	if err != nil {
		t.Fatal(err)
	}
	schemaPath := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schemaPath, schemaJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	layout := arena.Schema().MustCompile()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			msgs := buildImpairedStream(t, seed, 48, 600)
			var file bytes.Buffer
			for _, m := range msgs {
				file.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(m))))
				file.Write(m)
			}
			streamPath := filepath.Join(dir, fmt.Sprintf("stream-%d.bin", seed))
			if err := os.WriteFile(streamPath, file.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("build/nfbench", "--schema", schemaPath, "--stream", streamPath, "--dump").Output()
			if err != nil {
				t.Fatalf("nfbench --dump: %v", err)
			}
			var c cView
			if err := json.Unmarshal(out, &c); err != nil {
				t.Fatalf("%v: %s", err, out)
			}

			g := client.NewLayout(layout)
			var ack []byte
			for _, m := range msgs {
				if err := g.HandleMessage(m, 0); err != nil {
					t.Fatalf("go client: %v", err)
				}
				if a, ok := g.AppendAck(nil); ok {
					ack = a
				}
			}
			st := g.Stats()
			if c.Applied != st.RecordsApplied || c.Stale != st.RecordsStale || c.Unapplied != st.RecordsUnapplied ||
				c.Resets != st.Resets || c.Malformed != 0 || st.Malformed != 0 {
				t.Errorf("counters: C applied %d stale %d unapplied %d resets %d malformed %d; Go %d %d %d %d %d",
					c.Applied, c.Stale, c.Unapplied, c.Resets, c.Malformed,
					st.RecordsApplied, st.RecordsStale, st.RecordsUnapplied, st.Resets, st.Malformed)
			}
			if c.Ack != hex.EncodeToString(ack) {
				t.Errorf("last ACK: C %s, Go %x", c.Ack, ack)
			}
			in, ok := g.InputAck()
			if !ok || c.InputAck != int(in) || c.LastAppliedTick != g.LastAppliedTick() {
				t.Errorf("input ack C %d, Go %d; applied tick C %d, Go %d", c.InputAck, in, c.LastAppliedTick, g.LastAppliedTick())
			}
			if len(c.Entities) != g.Len() {
				t.Errorf("C holds %d entities, Go %d", len(c.Entities), g.Len())
			}
			sort.Slice(c.Entities, func(i, j int) bool { return c.Entities[i].ID < c.Entities[j].ID })
			for _, ce := range c.Entities {
				ge, ok := g.Entity(ce.ID)
				if !ok {
					t.Errorf("entity %d: only in the C view", ce.ID)
					continue
				}
				want := viewEntity{ID: ge.ID, Kind: ge.Kind, Pos: ge.State.Pos, Rot: ge.State.Rot,
					Vel: [3]int32{int32(ge.State.Vel[0]), int32(ge.State.Vel[1]), int32(ge.State.Vel[2])}, Fields: ge.Fields}
				if want.Fields == nil {
					want.Fields = []uint32{}
				}
				if !ce.equal(want) || ce.Tick != ge.Tick {
					t.Errorf("entity %d: C %+v at tick %d, Go %+v at tick %d", ce.ID, ce.viewEntity, ce.Tick, want, ge.Tick)
				}
			}
			t.Logf("%d messages: %d records applied, %d stale, %d unapplied, %d resets; %d entities",
				len(msgs), st.RecordsApplied, st.RecordsStale, st.RecordsUnapplied, st.Resets, g.Len())
		})
	}
}
