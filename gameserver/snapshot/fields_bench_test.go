package snapshot

import (
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// The fields benchmark is the server's data path for one tick of a game with custom fields:
// units at rest, each with four fields of 32 bits in all (health 10 bits, ammo 8, an enum of 16
// states, a signed score of 10 bits), all four changing on a quarter of the units every tick; 256
// sessions, each following an avatar of its own, acknowledge after ackDelay ticks, as in
// BenchmarkTick. It reports the tick's time and bytes, and bytes per entity sent. The protobuf
// comparison encodes the same content — the units each session's frame carried, with their new
// field values — as protobuf, hand-encoded with protowire as BenchmarkEncodeVsProtobuf does:
//
//	message FieldsSnapshot { uint32 tick = 1; fixed32 server_time_ms = 2; uint32 seq = 3; repeated Unit units = 4; }
//	message Unit { uint32 id = 1; uint32 health = 2; uint32 ammo = 3; uint32 state = 4; sint32 score = 5; }

const (
	kindUnit   entity.Kind = 1
	kindPlayer entity.Kind = 2
)

func fieldsBenchSchema() *protocol.Schema {
	states := make([]string, 16)
	for i := range states {
		states[i] = string(rune('a' + i))
	}
	return &protocol.Schema{Kinds: []protocol.KindSchema{
		{ID: uint8(kindUnit), Name: "unit", Parts: protocol.PartPosition, Fields: []protocol.Field{
			protocol.Uint("health", 10), protocol.Uint("ammo", 8), protocol.Enum("state", states...), protocol.Int("score", 10),
		}},
		{ID: uint8(kindPlayer), Name: "player", Parts: protocol.PartPosition},
	}}
}

type fieldsBench struct {
	st       *entity.Store
	units    []entity.ID
	fields   [4]entity.Field
	values   [][4]int64 // each unit's current field values
	rng      uint64
	sessions []*View
	frames   []*Frame
	sentSeq  [][sentRing]int32
	ackBytes []byte
	ack      protocol.Ack
	budget   int
	bytes    int
	records  uint64
}

func newFieldsBench(tb testing.TB, sessions int) *fieldsBench {
	tb.Helper()
	st, err := entity.NewStore(entity.Config{Capacity: benchEntities, HalfExtent: benchHalf, Schema: fieldsBenchSchema()})
	if err != nil {
		tb.Fatal(err)
	}
	fb := &fieldsBench{st: st, rng: 1, sentSeq: make([][sentRing]int32, sessions)}
	for i, name := range []string{"health", "ammo", "state", "score"} {
		fb.fields[i] = st.MustField(kindUnit, name)
	}
	place := func() entity.Transform {
		x := float32(fb.rand(2*benchHalf)) - benchHalf
		y := float32(fb.rand(2*benchHalf)) - benchHalf
		return entity.Transform{Pos: [3]float32{x, y, 0}}
	}
	for range benchEntities - sessions {
		id, err := st.Spawn(kindUnit, place())
		if err != nil {
			tb.Fatal(err)
		}
		fb.units = append(fb.units, id)
	}
	fb.values = make([][4]int64, len(fb.units))
	for i := range fb.units {
		fb.change(i)
	}
	nc := netcode.NetcodeConfig{}.Default()
	cfg := FromNetcode(netcode.MustResolve(nc), benchRadius)
	fb.budget = int(*nc.Budget.SnapshotBytesPerTick)
	sh := NewShared(st.Capacity())
	for i := range sessions {
		v, err := NewView(st, sh, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		avatar, err := st.Spawn(kindPlayer, place())
		if err != nil {
			tb.Fatal(err)
		}
		v.SetFocus(avatar)
		fb.sessions = append(fb.sessions, v)
		fb.frames = append(fb.frames, NewFrame(int(nc.Backpressure.FrameBytes)))
		for k := range fb.sentSeq[i] {
			fb.sentSeq[i][k] = -1
		}
	}
	fb.ackBytes = make([]byte, 0, 128)
	for range 180 {
		fb.tick()
	}
	return fb
}

func (fb *fieldsBench) rand(n int) int {
	fb.rng = fb.rng*6364136223846793005 + 1442695040888963407
	return int((fb.rng >> 33) % uint64(n))
}

// change gives unit i four new field values, each different from its last.
func (fb *fieldsBench) change(i int) {
	v := &fb.values[i]
	v[0] = (v[0] + 1 + int64(fb.rand(1022))) % 1024
	v[1] = (v[1] + 1 + int64(fb.rand(254))) % 256
	v[2] = (v[2] + 1 + int64(fb.rand(14))) % 16
	v[3] = (v[3]+512+1+int64(fb.rand(1022)))%1024 - 512
	id := fb.units[i]
	if fb.st.SetUint(id, fb.fields[0], uint64(v[0])) != nil || fb.st.SetUint(id, fb.fields[1], uint64(v[1])) != nil ||
		fb.st.SetEnum(id, fb.fields[2], int(v[2])) != nil || fb.st.SetInt(id, fb.fields[3], v[3]) != nil {
		panic("field out of range")
	}
}

// tick changes the fields of a quarter of the units, commits the store, and runs every session:
// its ACK, then its frame.
func (fb *fieldsBench) tick() {
	fb.st.Advance()
	t := fb.st.Tick()
	for i := int(t % 4); i < len(fb.units); i += 4 {
		fb.change(i)
	}
	fb.st.Commit()
	nowMs := int64(t) * tickMs
	fb.bytes = 0
	for i, s := range fb.sessions {
		if sent := fb.sentSeq[i][(t-ackDelay-1)%sentRing]; sent >= 0 {
			a := protocol.Ack{Latest: uint16(sent), Received: math.MaxUint64, LastAppliedTick: t - ackDelay - 1}
			fb.ackBytes = protocol.AppendAck(fb.ackBytes[:0], &a)
			if err := protocol.DecodeAck(fb.ackBytes, &fb.ack); err != nil {
				panic(err)
			}
			if _, err := s.HandleAck(&fb.ack); err != nil {
				panic(err)
			}
		}
		f := fb.frames[i]
		fb.sentSeq[i][t%sentRing] = -1
		res, err := s.BuildFrame(fb.budget, nowMs, f)
		if err != nil {
			panic(err)
		}
		fb.records += uint64(res.Records())
		fb.bytes += f.Bytes()
		if f.Packets() > 0 {
			fb.sentSeq[i][t%sentRing] = int32(s.nextSeq - 1)
		}
	}
}

// BenchmarkFieldsTick reports, per tick of 256 sessions: ns/op, p50-ns/tick and cpu-ns/tick as
// BenchmarkTick does, bytes/tick, records/tick, and bytes/entity (the frames' bytes, headers
// included, over the records they carried).
func BenchmarkFieldsTick(b *testing.B) {
	fb := newFieldsBench(b, 256)
	bytes, records := 0, fb.records
	took := make([]time.Duration, 4096)
	b.ReportAllocs()
	cpu := cpuTime()
	n := 0
	for b.Loop() {
		t0 := time.Now()
		fb.tick()
		took[n%len(took)] = time.Since(t0)
		n++
		bytes += fb.bytes
	}
	b.StopTimer()
	took = took[:min(n, len(took))]
	slices.Sort(took)
	recs := float64(fb.records - records)
	b.ReportMetric(float64(took[len(took)/2]), "p50-ns/tick")
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/tick")
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/tick")
	b.ReportMetric(recs/float64(b.N), "records/tick")
	b.ReportMetric(float64(bytes)/recs, "bytes/entity")
}

// TestFieldsTickAllocatesNothing: a warm tick of the fields game allocates nothing, and its
// frames carry only field changes: a unit at rest whose fields changed costs a delta of its
// fields section alone, far under a spawn.
func TestFieldsTickAllocatesNothing(t *testing.T) {
	fb := newFieldsBench(t, 16)
	if allocs := testing.AllocsPerRun(50, fb.tick); allocs != 0 {
		t.Fatalf("%v allocations per tick, want 0", allocs)
	}
	records := fb.records
	bytes := 0
	for range 20 {
		fb.tick()
		bytes += fb.bytes
	}
	perEntity := float64(bytes) / float64(fb.records-records)
	// A delta of the four fields is 2+1+12 op and id, 5 age, 3 transform sections, 1+1+6 length,
	// 4 mask and 32 values: 67 bits, 8.4 bytes; headers add a little.
	if perEntity > 9.5 {
		t.Fatalf("%.1f bytes per entity sent, want about 8.5", perEntity)
	}
}

// fieldsContent is what each session's frame carried in one steady-state tick of the fields
// benchmark: the units and their field values, and the baselines the deltas were made against.
type fieldsContent struct {
	tick     uint32
	sessions [][]uint16 // the units each session's frame carried
	views    [][]uint16 // the units within each session's interest radius
	layout   *protocol.Layout
	stride   int
	// By slot: the units' field values, their field words now and baseAge ticks before, and
	// their states.
	values    [][4]int64
	cur, base []uint32
	states    []protocol.State
	baseAge   uint32
}

func captureFields(tb testing.TB, sessions int) *fieldsContent {
	tb.Helper()
	fb := newFieldsBench(tb, sessions)
	fb.tick()
	n, stride := fb.st.Capacity(), fb.st.Layout().Stride()
	c := &fieldsContent{tick: fb.st.Tick(), layout: fb.st.Layout(), stride: stride, baseAge: ackDelay + 2,
		values: make([][4]int64, n), cur: slices.Clone(fb.st.Fields()), base: make([]uint32, n*stride),
		states: slices.Clone(fb.st.States())}
	for i, id := range fb.units {
		c.values[id.Slot()] = fb.values[i]
	}
	for _, v := range fb.sessions {
		m := fb.st.Metas()[v.Focus().Slot()]
		var ids []uint16
		for _, h := range fb.st.Query(m.X, m.Y, benchRadius, nil) {
			if fb.st.Kinds()[h.Slot] == kindUnit {
				ids = append(ids, h.Slot)
			}
		}
		c.views = append(c.views, ids)
	}
	// The field history holds HistoryTicks rows of Capacity * stride words, by tick.
	row := int(c.tick-c.baseAge) % fb.st.HistoryTicks()
	copy(c.base, fb.st.FieldHistory()[row*n*stride:])
	var snap protocol.Snapshot
	for _, f := range fb.frames {
		var ids []uint16
		for p := range f.Packets() {
			if err := c.layout.DecodeSnapshot(f.Packet(p), &snap); err != nil {
				tb.Fatal(err)
			}
			for _, r := range snap.Records {
				if r.Op == protocol.OpDelta && r.FieldsBits > 0 {
					ids = append(ids, r.ID)
				}
			}
		}
		c.sessions = append(c.sessions, ids)
	}
	return c
}

// encodeOurs encodes every session's units as deltas against the states baseAge ticks earlier
// into MTU-sized packets; it returns the bytes produced.
func (c *fieldsContent) encodeOurs(buf []byte, enc *protocol.SnapshotEncoder) int {
	enc.SetLayout(c.layout)
	total := 0
	for si, ids := range c.sessions {
		h := protocol.SnapshotHeader{Tick: c.tick, ServerTimeMs: 1, Seq: uint16(si)}
		enc.Begin(buf, &h)
		for _, id := range ids {
			st := &c.states[id]
			w := c.stride * int(id)
			for !enc.Delta(id, c.baseAge, uint8(kindUnit), st, st, c.base[w:w+c.stride], c.cur[w:w+c.stride]) {
				total += len(enc.Finish())
				h.Seq++
				enc.Begin(buf, &h)
			}
		}
		total += len(enc.Finish())
	}
	return total
}

// encodeProtobuf encodes each session's units (c.sessions: the ones that changed, which its
// frame carried; c.views: every unit in its view, as a snapshot of full state carries them) as one
// FieldsSnapshot message; it returns the bytes.
func (c *fieldsContent) encodeProtobuf(buf []byte, sessions [][]uint16) int {
	total := 0
	for si, ids := range sessions {
		b := buf[:0]
		b = appendUint(b, 1, uint64(c.tick))
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, 1)
		b = appendUint(b, 3, uint64(si))
		for _, id := range ids {
			v := &c.values[id]
			size := sizeUint(uint64(id)) + sizeUint(uint64(v[0])) + sizeUint(uint64(v[1])) + sizeUint(uint64(v[2])) + sizeSint(int32(v[3]))
			b = protowire.AppendTag(b, 4, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(size))
			b = appendUint(b, 1, uint64(id))
			b = appendUint(b, 2, uint64(v[0]))
			b = appendUint(b, 3, uint64(v[1]))
			b = appendUint(b, 4, uint64(v[2]))
			b = appendSint(b, 5, int32(v[3]))
		}
		total += len(b)
	}
	return total
}

// BenchmarkFieldsVsProtobuf encodes the units of one steady-state tick of BenchmarkFieldsTick's
// 256 sessions as netfleet deltas and as protobuf: protobuf-changed encodes the units that
// changed (what each netfleet frame carried), protobuf-view every unit in the session's view (a
// protobuf snapshot of full state, having no acknowledged baseline to send changes against).
// bytes/tick and ns/op compare directly; bytes/entity and ns/entity are over the units each
// encoding carries.
func BenchmarkFieldsVsProtobuf(b *testing.B) {
	c := captureFields(b, 256)
	count := func(sessions [][]uint16) (n int) {
		for _, ids := range sessions {
			n += len(ids)
		}
		return n
	}
	changed, inView := count(c.sessions), count(c.views)
	buf := make([]byte, 1200)
	pbuf := make([]byte, 0, 1<<20)
	var enc protocol.SnapshotEncoder
	cases := []struct {
		name    string
		records int
		fn      func() int
	}{
		{"netfleet", changed, func() int { return c.encodeOurs(buf, &enc) }},
		{"protobuf-changed", changed, func() int { return c.encodeProtobuf(pbuf, c.sessions) }},
		{"protobuf-view", inView, func() int { return c.encodeProtobuf(pbuf, c.views) }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n = tc.fn()
			}
			b.ReportMetric(float64(n), "bytes/tick")
			b.ReportMetric(float64(n)/float64(tc.records), "bytes/entity")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tc.records), "ns/entity")
			b.ReportMetric(float64(inView)/float64(len(c.views)), "units-in-view/session")
		})
	}
}
