package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// The golden vectors (testdata/golden/vectors.json) are encoded messages together with their
// decoded meaning, for every message type and every record shape, so that an implementation in
// another language can check itself against this one: docs/protocol.md is their specification.
// TestGoldenVectors checks them both ways: each vector's bytes decode to its meaning, and its
// meaning encodes to its bytes. go test -run TestGoldenVectors -update-golden rewrites them from
// goldenCases, after a deliberate change of the wire format.

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/vectors.json")

const goldenPath = "testdata/golden/vectors.json"

// goldenFile is the JSON of the vectors.
type goldenFile struct {
	Comment    string         `json:"comment"`
	Schema     *Schema        `json:"schema"`
	SchemaHash string         `json:"schemaHash"`
	Vectors    []goldenVector `json:"vectors"`
	// Quantization pins the formulas of docs/protocol.md down to the last bit.
	Quantization goldenQuant `json:"quantization"`
}

type goldenClose struct {
	Code   uint32 `json:"code"`
	Reason string `json:"reason"`
}

type goldenReset struct {
	Tick uint32 `json:"tick"`
}

type goldenPing struct {
	ClientTimeMs    uint32 `json:"clientTimeMs"`
	LastAppliedTick uint32 `json:"lastAppliedTick"`
}

// goldenQuant lists inputs and what the quantizers make of them: positions in meters and
// velocities in m/s (float32 values) to units, quaternions to packed rotations, packed rotations
// to the unit quaternions a client unpacks.
type goldenQuant struct {
	Positions  []goldenScalar `json:"positions"`
	Velocities []goldenScalar `json:"velocities"`
	Pack       []goldenPack   `json:"pack"`
	Unpack     []goldenUnpack `json:"unpack"`
}

type goldenScalar struct {
	In    float64 `json:"in"`
	Units int32   `json:"units"`
}

type goldenPack struct {
	Quat   [4]float64 `json:"quat"` // x, y, z, w
	Packed string     `json:"packed"`
}

type goldenUnpack struct {
	Packed string     `json:"packed"`
	Quat   [4]float64 `json:"quat"`
}

// goldenQuantCases covers rounding (halves both ways), clamping and the rotation's edge cases:
// a negative largest component, ties between components, an unnormalized and a zero quaternion.
func goldenQuantCases() goldenQuant {
	var q goldenQuant
	for _, m := range []float32{0, 1, -1, 1.0 / 128, -1.0 / 128, 3.0 / 128, 0.004, 2047.99, 2048, -2048, -2049, 1e9, -1e9} {
		q.Positions = append(q.Positions, goldenScalar{In: float64(m), Units: QuantizePos(m)})
	}
	for _, v := range []float32{0, 1.0 / 128, -1.0 / 128, 2.5, -127.99, 128, -128.5, 1e6} {
		q.Velocities = append(q.Velocities, goldenScalar{In: float64(v), Units: int32(QuantizeVel(v))})
	}
	quats := [][4]float64{
		{0, 0, 0, 1}, {0, 0, 0, -1}, {1, 0, 0, 0}, {0, 0.7071067811865476, 0, 0.7071067811865476},
		{0.1, 0.2, 0.3, 0.9}, {-0.5, 0.5, -0.5, -0.5}, {2, 0, 0, 2}, {0, 0, 0, 0}, {0.3, -0.9, 0.1, 0.2},
	}
	for _, x := range quats {
		p := PackRotation(x[0], x[1], x[2], x[3])
		q.Pack = append(q.Pack, goldenPack{Quat: x, Packed: fmt.Sprintf("%08x", p)})
	}
	for _, p := range []uint32{0, 0xffffffff, YawRotation(0), YawRotation(1), PackRotation(0.1, 0.2, 0.3, 0.9), 0x40000000 | 1023<<20} {
		x, y, z, w := UnpackRotation(p)
		q.Unpack = append(q.Unpack, goldenUnpack{Packed: fmt.Sprintf("%08x", p), Quat: [4]float64{x, y, z, w}})
	}
	return q
}

// checkGoldenQuant recomputes every quantization vector from its input.
func checkGoldenQuant(q *goldenQuant) error {
	for _, c := range q.Positions {
		if u := QuantizePos(float32(c.In)); u != c.Units {
			return fmt.Errorf("position %v: %d units, the file says %d", c.In, u, c.Units)
		}
	}
	for _, c := range q.Velocities {
		if u := int32(QuantizeVel(float32(c.In))); u != c.Units {
			return fmt.Errorf("velocity %v: %d units, the file says %d", c.In, u, c.Units)
		}
	}
	for _, c := range q.Pack {
		if p := fmt.Sprintf("%08x", PackRotation(c.Quat[0], c.Quat[1], c.Quat[2], c.Quat[3])); p != c.Packed {
			return fmt.Errorf("pack %v: %s, the file says %s", c.Quat, p, c.Packed)
		}
	}
	for _, c := range q.Unpack {
		p, err := strconv.ParseUint(c.Packed, 16, 32)
		if err != nil {
			return err
		}
		if x, y, z, w := UnpackRotation(uint32(p)); [4]float64{x, y, z, w} != c.Quat {
			return fmt.Errorf("unpack %s: %v, the file says %v", c.Packed, [4]float64{x, y, z, w}, c.Quat)
		}
	}
	return nil
}

type goldenVector struct {
	Name string `json:"name"`
	// Schema says which schema the SNAPSHOT's records follow: "file" (the file's) or "none"
	// (every kind has the whole transform and no fields).
	Schema   string          `json:"schema,omitempty"`
	Hex      string          `json:"hex"`
	Hello    *goldenHello    `json:"hello,omitempty"`
	Close    *goldenClose    `json:"close,omitempty"`
	Reset    *goldenReset    `json:"reset,omitempty"`
	Ping     *goldenPing     `json:"ping,omitempty"`
	Ack      *goldenAck      `json:"ack,omitempty"`
	Command  *goldenCommand  `json:"command,omitempty"`
	Snapshot *goldenSnapshot `json:"snapshot,omitempty"`
}

type goldenHello struct {
	SchemaHash string `json:"schemaHash"`
	Token      string `json:"token,omitempty"` // hex
}

type goldenAck struct {
	Latest          uint16   `json:"latest"`
	Received        string   `json:"received"` // 64-bit mask, hex
	LastAppliedTick uint32   `json:"lastAppliedTick"`
	Resync          bool     `json:"resync"`
	NeedFull        []uint16 `json:"needFull"`
}

type goldenCommand struct {
	Seq     uint16 `json:"seq"`
	Tick    uint32 `json:"tick"`
	Payload string `json:"payload"` // hex
}

type goldenSnapshot struct {
	Tick         uint32         `json:"tick"`
	ServerTimeMs uint32         `json:"serverTimeMs"`
	Seq          uint16         `json:"seq"`
	Flags        uint8          `json:"flags"`
	InputSeq     *uint16        `json:"inputSeq,omitempty"`
	Records      []goldenRecord `json:"records"`
}

// goldenRecord is a record with what it means: a spawn's state and fields; a delta's baseline
// tick, the baseline it is applied to and the state and fields that gives; a despawn's id.
type goldenRecord struct {
	Op           string       `json:"op"`
	ID           uint16       `json:"id"`
	Kind         uint8        `json:"kind"`
	State        *goldenState `json:"state,omitempty"`
	BaselineTick uint32       `json:"baselineTick,omitempty"`
	Base         *goldenState `json:"base,omitempty"`
	// FieldsChanged lists a delta's changed fields, in the order of its fields section.
	FieldsChanged []string `json:"fieldsChanged,omitempty"`
}

type goldenState struct {
	Pos    [3]int32       `json:"pos"`
	Rot    string         `json:"rot"` // packed, hex
	Vel    [3]int16       `json:"vel"`
	Fields map[string]any `json:"fields,omitempty"`
	Words  []uint32       `json:"words,omitempty"` // the fields' words, as a state holds them
}

// goldenRec is one record of a golden SNAPSHOT as the cases build it.
type goldenRec struct {
	op             Op
	id             uint16
	kind           uint8
	age            uint32
	base, cur      State
	bfields, cfs   []uint32
	fieldsOfKind   map[string]any // set on the current state's fields
	baseFieldsKind map[string]any // set on the baseline's fields
}

// goldenCases builds the vectors' messages.
func goldenCases(l *Layout) []goldenVector {
	var out []goldenVector
	add := func(v goldenVector, b []byte) {
		v.Hex = hex.EncodeToString(b)
		out = append(out, v)
	}
	hello, _ := AppendHello(nil, &Hello{SchemaHash: l.Hash()})
	add(goldenVector{Name: "HELLO", Hello: &goldenHello{SchemaHash: fmt.Sprintf("%016x", l.Hash())}}, hello)
	token := []byte("\x01an opaque connect token\xff")
	helloToken, _ := AppendHello(nil, &Hello{SchemaHash: l.Hash(), Token: token})
	add(goldenVector{Name: "HELLO with a connect token", Hello: &goldenHello{SchemaHash: fmt.Sprintf("%016x", l.Hash()),
		Token: hex.EncodeToString(token)}}, helloToken)
	cl := Close{Code: CloseSchema, Reason: "schema mismatch"}
	add(goldenVector{Name: "CLOSE", Close: &goldenClose{Code: cl.Code, Reason: cl.Reason}}, AppendClose(nil, &cl))
	rs := Reset{Tick: 0x01020304}
	add(goldenVector{Name: "RESET", Reset: &goldenReset{Tick: rs.Tick}}, AppendReset(nil, &rs))
	pg := Ping{ClientTimeMs: 0xdeadbeef, LastAppliedTick: 4242}
	add(goldenVector{Name: "PING", Ping: &goldenPing{ClientTimeMs: pg.ClientTimeMs, LastAppliedTick: pg.LastAppliedTick}}, AppendPing(nil, &pg))
	ack := Ack{Latest: 300, Received: 0x8000_0000_0000_0005, LastAppliedTick: 777, Resync: false}
	ack.AddNeedFull(12)
	ack.AddNeedFull(4096)
	add(goldenVector{Name: "ACK with NeedFull", Ack: &goldenAck{Latest: ack.Latest, Received: fmt.Sprintf("%016x", ack.Received),
		LastAppliedTick: ack.LastAppliedTick, NeedFull: ack.NeedFull()}}, AppendAck(nil, &ack))
	resync := Ack{Latest: 1, Received: 0, LastAppliedTick: 2, Resync: true}
	add(goldenVector{Name: "ACK asking for a RESET", Ack: &goldenAck{Latest: 1, Received: "0000000000000000", LastAppliedTick: 2,
		Resync: true, NeedFull: []uint16{}}}, AppendAck(nil, &resync))
	cmd := Command{Seq: 65535, Tick: 9000, Payload: []byte{1, 2, 3, 0xff}}
	cb, _ := AppendCommand(nil, &cmd)
	add(goldenVector{Name: "COMMAND", Command: &goldenCommand{Seq: cmd.Seq, Tick: cmd.Tick, Payload: hex.EncodeToString(cmd.Payload)}}, cb)

	// SNAPSHOTs: every record shape, with no schema and with the file's.
	transform := func() []goldenRec {
		base := State{Pos: [3]int32{100, -200, 64}, Rot: YawRotation(0.5), Vel: [3]int16{64, 0, -1}}
		return []goldenRec{
			{op: OpSpawn, id: 7, kind: 3, cur: State{Pos: [3]int32{PosMin, PosMax, 0}, Rot: YawRotation(1), Vel: [3]int16{}}},
			{op: OpSpawn, id: 5000, kind: 200, cur: State{Pos: [3]int32{1, 2, 3}, Rot: PackRotation(0.1, 0.2, 0.3, 0.9), Vel: [3]int16{VelMin, VelMax, 5}}},
			{op: OpDelta, id: 8, age: 3, base: base, cur: State{Pos: [3]int32{107, -200, 64}, Rot: base.Rot, Vel: base.Vel}},
			{op: OpDelta, id: 9, age: 16, base: base, cur: State{Pos: [3]int32{100 - 200, -200 + 3000, 64 + 60000}, Rot: base.Rot + 5, Vel: [3]int16{60, 1000, -1}}},
			{op: OpDelta, id: 4097, age: 1024, base: base, cur: State{Pos: base.Pos, Rot: YawRotation(2.5), Vel: [3]int16{64, 0, 8000}}},
			{op: OpDelta, id: 10, age: 2, base: base, cur: base},
			{op: OpDespawn, id: 11},
			{op: OpDespawn, id: 40000},
		}
	}
	var none *Layout
	snap := func(name string, lay *Layout, h SnapshotHeader, recs []goldenRec) {
		var enc SnapshotEncoder
		enc.SetLayout(lay)
		buf := make([]byte, 1400)
		enc.Begin(buf, &h)
		gs := &goldenSnapshot{Tick: h.Tick, ServerTimeMs: h.ServerTimeMs, Seq: h.Seq, Flags: h.Flags, Records: []goldenRec0{}}
		if h.Flags&FlagInputAck != 0 {
			gs.InputSeq = &h.InputSeq
		}
		for i := range recs {
			r := &recs[i]
			kl := lay.Kind(r.kind)
			if lay != nil && kl != nil && kl.Words > 0 {
				r.cfs, r.bfields = make([]uint32, lay.Stride()), make([]uint32, lay.Stride())
				putFields(kl, r.cfs, r.fieldsOfKind)
				putFields(kl, r.bfields, r.baseFieldsKind)
			}
			switch r.op {
			case OpSpawn:
				enc.Spawn(r.id, r.kind, &r.cur, r.cfs)
			case OpDelta:
				enc.Delta(r.id, r.age, r.kind, &r.base, &r.cur, r.bfields, r.cfs)
			case OpDespawn:
				enc.Despawn(r.id)
			}
			gs.Records = append(gs.Records, goldenRecordOf(lay, r, h.Tick))
		}
		schemaName := "none"
		if lay != nil {
			schemaName = "file"
		}
		add(goldenVector{Name: name, Schema: schemaName, Snapshot: gs}, enc.Finish())
	}
	snap("SNAPSHOT of every record shape, no schema", none, SnapshotHeader{Tick: 50000, ServerTimeMs: 123456, Seq: 77, Flags: FlagLast}, transform())
	snap("SNAPSHOT, empty, reset and input acknowledged", none,
		SnapshotHeader{Tick: 1, ServerTimeMs: 2, Seq: 3, Flags: FlagReset | FlagInputAck, InputSeq: 513}, nil)

	player := map[string]any{"health": 73.5, "ammo": 30, "team": "blue", "crouched": true, "score": -1234, "name": "41646121007a"}
	hurt := map[string]any{"health": 12.0, "ammo": 30, "team": "blue", "crouched": true, "score": -1234, "name": "41646121007a"}
	base := State{Pos: [3]int32{10, 20, 30}, Rot: YawRotation(-1), Vel: [3]int16{1, 2, 3}}
	snap("SNAPSHOT with fields", l, SnapshotHeader{Tick: 9999, ServerTimeMs: 5, Seq: 1, Flags: FlagLast | FlagInputAck, InputSeq: 42}, []goldenRec{
		{op: OpSpawn, id: 1, kind: 1, cur: base, fieldsOfKind: player},
		{op: OpSpawn, id: 2, kind: 2, cur: State{Pos: [3]int32{-64, 64, 0}}, fieldsOfKind: map[string]any{"item": "health", "taken": false}},
		{op: OpSpawn, id: 3, kind: 7, fieldsOfKind: map[string]any{"red": 4095, "blue": 0, "clock": 1 << 19}},
		{op: OpSpawn, id: 4, kind: 9, cur: base},
		{op: OpDelta, id: 1, kind: 1, age: 2, base: base, cur: base, baseFieldsKind: player, fieldsOfKind: hurt},
		{op: OpDelta, id: 1, kind: 1, age: 3, base: base, cur: State{Pos: [3]int32{11, 20, 30}, Rot: base.Rot, Vel: base.Vel},
			baseFieldsKind: player, fieldsOfKind: player},
		{op: OpDelta, id: 3, kind: 7, age: 1, baseFieldsKind: map[string]any{"red": 1, "blue": 2, "clock": 3},
			fieldsOfKind: map[string]any{"red": 1, "blue": 3, "clock": 4}},
		{op: OpDelta, id: 4, kind: 9, age: 5, base: base, cur: State{Pos: base.Pos, Rot: base.Rot, Vel: [3]int16{}}},
		{op: OpDespawn, id: 2},
	})
	return out
}

// goldenRecord0 is the JSON record type (goldenRecord), named apart so that goldenCases reads.
type goldenRec0 = goldenRecord

func goldenRecordOf(l *Layout, r *goldenRec, tick uint32) goldenRecord {
	g := goldenRecord{ID: r.id}
	kl := l.Kind(r.kind)
	state := func(s *State, words []uint32) *goldenState {
		gs := &goldenState{Pos: s.Pos, Rot: fmt.Sprintf("%08x", s.Rot), Vel: s.Vel}
		if kl != nil && kl.Words > 0 {
			gs.Words = slices.Clone(words[:kl.Words])
			gs.Fields = map[string]any{}
			for i := range kl.Fields {
				f := &kl.Fields[i]
				gs.Fields[f.Name] = fieldValueJSON(f, words)
			}
		}
		return gs
	}
	switch r.op {
	case OpSpawn:
		g.Op, g.Kind, g.State = "spawn", r.kind, state(&r.cur, r.cfs)
	case OpDelta:
		g.Op, g.BaselineTick = "delta", tick-r.age
		g.Base, g.State = state(&r.base, r.bfields), state(&r.cur, r.cfs)
		if l != nil && l.hasFields {
			g.Kind = r.kind // the fields section is read against the entity's kind
			g.FieldsChanged = []string{}
			for i := range kl.Fields {
				f := &kl.Fields[i]
				if !slices.Equal(r.bfields[f.Word:f.Word+f.Words()], r.cfs[f.Word:f.Word+f.Words()]) {
					g.FieldsChanged = append(g.FieldsChanged, f.Name)
				}
			}
		}
	case OpDespawn:
		g.Op = "despawn"
	}
	return g
}

// fieldValueJSON is a field's value as the vectors spell it: a number, a bool, an enum's name, bytes
// in hex.
func fieldValueJSON(f *FieldLayout, words []uint32) any {
	switch f.Type {
	case FieldUint:
		return float64(f.Uint(words))
	case FieldInt:
		return float64(f.Int(words))
	case FieldBool:
		return f.Bool(words)
	case FieldEnum:
		_, v := f.Enum(words)
		return v
	case FieldFloat:
		return f.Float(words)
	case FieldBytes:
		return hex.EncodeToString(f.Bytes(nil, words))
	}
	return nil
}

// putFields sets the named fields' values.
func putFields(kl *KindLayout, words []uint32, values map[string]any) {
	for name, v := range values {
		f := kl.Field(name)
		var err error
		switch f.Type {
		case FieldUint:
			err = f.PutUint(words, uint64(toFloat(v)))
		case FieldInt:
			err = f.PutInt(words, int64(toFloat(v)))
		case FieldBool:
			err = f.PutBool(words, v.(bool))
		case FieldEnum:
			err = f.PutEnum(words, slices.Index(f.Values, v.(string)))
		case FieldFloat:
			err = f.PutFloat(words, toFloat(v))
		case FieldBytes:
			b, _ := hex.DecodeString(v.(string))
			err = f.PutBytes(words, b)
		}
		if err != nil {
			panic(fmt.Sprintf("golden field %s = %v: %v", name, v, err))
		}
	}
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	panic(fmt.Sprintf("not a number: %v", v))
}

func TestGoldenVectors(t *testing.T) {
	l := testSchema().MustCompile()
	want := goldenFile{
		Comment: "netfleet wire-format vectors: every message encoded (hex) with its meaning; docs/protocol.md specifies them. " +
			"SNAPSHOT records follow the schema below when the vector's schema is \"file\", and have the whole transform and no fields when it is \"none\".",
		Schema:       l.Schema(),
		SchemaHash:   fmt.Sprintf("%016x", l.Hash()),
		Vectors:      goldenCases(l),
		Quantization: goldenQuantCases(),
	}
	raw, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, '\n')
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (go test -run TestGoldenVectors -update-golden writes it)", err)
	}
	// Encoding: what the encoders produce today is, byte for byte, what the file holds.
	if !bytes.Equal(stored, raw) {
		t.Fatalf("the encoders no longer produce %s; if the wire format changed on purpose, rerun with -update-golden and update docs/protocol.md", goldenPath)
	}
	// Decoding: every vector's bytes decode to its meaning, read from the file.
	var file goldenFile
	if err := json.Unmarshal(stored, &file); err != nil {
		t.Fatal(err)
	}
	if err := checkGoldenQuant(&file.Quantization); err != nil {
		t.Error(err)
	}
	for _, v := range file.Vectors {
		b, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if err := checkGolden(l, &v, b); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
}

// checkGolden decodes b and compares it with v's meaning.
func checkGolden(l *Layout, v *goldenVector, b []byte) error {
	switch {
	case v.Hello != nil:
		var h Hello
		if err := DecodeHello(b, &h); err != nil || fmt.Sprintf("%016x", h.SchemaHash) != v.Hello.SchemaHash ||
			hex.EncodeToString(h.Token) != v.Hello.Token {
			return fmt.Errorf("HELLO %016x token %x (%w)", h.SchemaHash, h.Token, err)
		}
	case v.Close != nil:
		var c Close
		if err := DecodeClose(b, &c); err != nil || c.Code != v.Close.Code || c.Reason != v.Close.Reason {
			return fmt.Errorf("CLOSE %+v (%w)", c, err)
		}
	case v.Reset != nil:
		var r Reset
		if err := DecodeReset(b, &r); err != nil || r.Tick != v.Reset.Tick {
			return fmt.Errorf("RESET %+v (%w)", r, err)
		}
	case v.Ping != nil:
		var p Ping
		if err := DecodePing(b, &p); err != nil || p.ClientTimeMs != v.Ping.ClientTimeMs || p.LastAppliedTick != v.Ping.LastAppliedTick {
			return fmt.Errorf("PING %+v (%w)", p, err)
		}
	case v.Ack != nil:
		var a Ack
		if err := DecodeAck(b, &a); err != nil || a.Latest != v.Ack.Latest || fmt.Sprintf("%016x", a.Received) != v.Ack.Received ||
			a.LastAppliedTick != v.Ack.LastAppliedTick || a.Resync != v.Ack.Resync || !slices.Equal(a.NeedFull(), v.Ack.NeedFull) {
			return fmt.Errorf("ACK %+v (%w)", a, err)
		}
	case v.Command != nil:
		var c Command
		if err := DecodeCommand(b, &c); err != nil || c.Seq != v.Command.Seq || c.Tick != v.Command.Tick ||
			hex.EncodeToString(c.Payload) != v.Command.Payload {
			return fmt.Errorf("COMMAND %+v (%w)", c, err)
		}
	case v.Snapshot != nil:
		lay := l
		if v.Schema == "none" {
			lay = nil
		}
		return checkGoldenSnapshot(lay, v.Snapshot, b)
	default:
		return fmt.Errorf("a vector of no message")
	}
	return nil
}

func checkGoldenSnapshot(l *Layout, want *goldenSnapshot, b []byte) error {
	var s Snapshot
	if err := l.DecodeSnapshot(b, &s); err != nil {
		return err
	}
	inputSeq := uint16(0)
	if want.InputSeq != nil {
		inputSeq = *want.InputSeq
	}
	if s.Tick != want.Tick || s.ServerTimeMs != want.ServerTimeMs || s.Seq != want.Seq || s.Flags != want.Flags ||
		s.InputSeq != inputSeq || len(s.Records) != len(want.Records) {
		return fmt.Errorf("header %+v with %d records", s.SnapshotHeader, len(s.Records))
	}
	for i := range s.Records {
		r, w := &s.Records[i], &want.Records[i]
		if r.ID != w.ID || opName(r.Op) != w.Op {
			return fmt.Errorf("record %d: %s %d, want %s %d", i, opName(r.Op), r.ID, w.Op, w.ID)
		}
		switch r.Op {
		case OpSpawn:
			if r.Kind != w.Kind || !sameState(l, w.Kind, &r.State, r.Fields, w.State) {
				return fmt.Errorf("record %d: spawn of kind %d %+v %v, want %+v", i, r.Kind, r.State, r.Fields, w.State)
			}
		case OpDelta:
			if r.BaselineTick != w.BaselineTick {
				return fmt.Errorf("record %d: baseline tick %d, want %d", i, r.BaselineTick, w.BaselineTick)
			}
			base := fromGolden(w.Base)
			st, ok := r.Delta.Apply(&base)
			var fields []uint32
			if l != nil && l.hasFields {
				fields = make([]uint32, l.Stride())
				bf := make([]uint32, l.Stride())
				copy(bf, w.Base.Words)
				ok = ok && l.ApplyFields(b, r, w.Kind, bf, fields)
			}
			if !ok || !sameState(l, w.Kind, &st, fields, w.State) {
				return fmt.Errorf("record %d: delta gives %+v %v, want %+v", i, st, fields, w.State)
			}
		}
	}
	return nil
}

func opName(op Op) string {
	switch op {
	case OpSpawn:
		return "spawn"
	case OpDelta:
		return "delta"
	case OpDespawn:
		return "despawn"
	}
	return "end"
}

func fromGolden(g *goldenState) State {
	rot, err := strconv.ParseUint(g.Rot, 16, 32)
	if err != nil {
		panic(fmt.Sprintf("golden rotation %q: %v", g.Rot, err))
	}
	return State{Pos: g.Pos, Rot: uint32(rot), Vel: g.Vel}
}

// sameState compares a decoded state and its fields with a vector's, the fields by their words
// and by their values as the vector spells them.
func sameState(l *Layout, kind uint8, s *State, fields []uint32, g *goldenState) bool {
	if *s != fromGolden(g) {
		return false
	}
	kl := l.Kind(kind)
	if kl == nil || kl.Words == 0 {
		return len(g.Words) == 0
	}
	if !slices.Equal(fields[:kl.Words], g.Words) {
		return false
	}
	for i := range kl.Fields {
		f := &kl.Fields[i]
		got, want := fieldValueJSON(f, fields), g.Fields[f.Name]
		if gf, ok := got.(float64); ok {
			if wf, ok := want.(float64); !ok || math.Abs(gf-wf) > 1e-9 {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			return false
		}
	}
	return true
}
