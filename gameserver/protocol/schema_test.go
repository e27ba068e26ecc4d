package protocol

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testSchema has a kind of every shape: the whole transform with fields of every type, a
// position only with a few fields, no transform at all (a scoreboard), and the transform alone.
func testSchema() *Schema {
	return &Schema{Kinds: []KindSchema{
		{ID: 1, Name: "player", Parts: Transform, Fields: []Field{
			Float("health", 0, 100, 0.5), Uint("ammo", 8), Enum("team", "red", "blue", "green"),
			Bool("crouched"), Int("score", 16), Bytes("name", 6),
		}},
		{ID: 2, Name: "pickup", Parts: PartPosition, Fields: []Field{Enum("item", "ammo", "health"), Bool("taken")}},
		{ID: 7, Name: "scoreboard", Fields: []Field{Uint("red", 12), Uint("blue", 12), Uint("clock", 20)}},
		{ID: 9, Name: "rock", Parts: Transform},
	}}
}

// TestSchemaValidation: every bad declaration is refused, naming its kind and field.
func TestSchemaValidation(t *testing.T) {
	if err := testSchema().Validate(); err != nil {
		t.Fatal(err)
	}
	wide := make([]Field, MaxFields+1)
	for i := range wide {
		wide[i] = Bool(string(rune('a'+i%26)) + strings.Repeat("x", i/26))
	}
	fat := []Field{Bytes("a", 16), Bytes("b", 16), Bytes("c", 16), Bytes("d", 16), Bytes("e", 16),
		Bytes("f", 16), Bytes("g", 16), Bytes("h", 16), Bool("one more")}
	cases := []struct {
		name        string
		kinds       []KindSchema
		kind, field string
		detail      string
	}{
		{"no kinds", nil, "", "", "no kinds"},
		{"kind id 0", []KindSchema{{ID: 0, Name: "k"}}, "k", "", "id 0"},
		{"duplicate id", []KindSchema{{ID: 3, Name: "a"}, {ID: 3, Name: "b"}}, "b", "", "id 3"},
		{"duplicate kind name", []KindSchema{{ID: 1, Name: "a"}, {ID: 2, Name: "a"}}, "a", "", "second kind"},
		{"nameless kind", []KindSchema{{ID: 1}}, "#0", "", "no name"},
		{"unknown parts", []KindSchema{{ID: 1, Name: "k", Parts: 1 << 5}}, "k", "", "unknown transform parts"},
		{"duplicate field", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Bool("x"), Uint("x", 3)}}}, "k", "x", "second field"},
		{"nameless field", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Bool("")}}}, "k", "#0", "no name"},
		{"zero-width uint", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Uint("u", 0)}}}, "k", "u", "uint of 0 bits"},
		{"wide int", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Int("i", 33)}}}, "k", "i", "int of 33 bits"},
		{"one-value enum", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Enum("e", "only")}}}, "k", "e", "enum of 1 values"},
		{"repeated enum value", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Enum("e", "a", "a")}}}, "k", "e", "repeated"},
		{"empty float range", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Float("f", 1, 1, 0.1)}}}, "k", "f", "min below max"},
		{"NaN step", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Float("f", 0, 1, math.NaN())}}}, "k", "f", "positive step"},
		{"zero-width float", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Float("f", 0, 1, 10)}}}, "k", "f", "0 steps"},
		{"float over 32 bits", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Float("f", 0, 1e10, 1e-3)}}}, "k", "f", "steps"},
		{"empty bytes", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Bytes("b", 0)}}}, "k", "b", "bytes of 0"},
		{"long bytes", []KindSchema{{ID: 1, Name: "k", Fields: []Field{Bytes("b", 17)}}}, "k", "b", "bytes of 17"},
		{"unknown type", []KindSchema{{ID: 1, Name: "k", Fields: []Field{{Name: "z", Type: 99}}}}, "k", "z", "unknown type"},
		{"too many fields", []KindSchema{{ID: 1, Name: "k", Fields: wide}}, "k", "", "fields, more than"},
		{"record over a packet", []KindSchema{{ID: 1, Name: "k", Fields: fat}}, "k", "", "could not fit a packet"},
	}
	for _, tc := range cases {
		err := (&Schema{Kinds: tc.kinds}).Validate()
		var se *SchemaError
		found := false
		for _, e := range unwrap(err) {
			if errors.As(e, &se) && se.Kind == tc.kind && se.Field == tc.field && strings.Contains(se.Detail, tc.detail) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %v; want an error for kind %q field %q saying %q", tc.name, err, tc.kind, tc.field, tc.detail)
		}
		if _, cerr := (&Schema{Kinds: tc.kinds}).Compile(); cerr == nil {
			t.Errorf("%s: Compile accepted it", tc.name)
		}
	}
}

func unwrap(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// TestSchemaHash: the hash is stable, independent of the order kinds are declared in, and
// changes with any declaration.
func TestSchemaHash(t *testing.T) {
	s := testSchema()
	h := s.Hash()
	if h != testSchema().Hash() {
		t.Fatal("the hash of one schema differs")
	}
	shuffled := testSchema()
	slices.Reverse(shuffled.Kinds)
	if shuffled.Hash() != h {
		t.Fatal("the order of kinds changed the hash")
	}
	for i, edit := range []func(*Schema){
		func(s *Schema) { s.Kinds[0].Name = "hero" },
		func(s *Schema) { s.Kinds[0].Parts = PartPosition },
		func(s *Schema) { s.Kinds[0].Fields[1].Bits = 9 },
		func(s *Schema) { s.Kinds[0].Fields[2].Values[1] = "cyan" },
		func(s *Schema) { s.Kinds[0].Fields[0].Step = 0.25 },
		func(s *Schema) { s.Kinds[0].Fields[5].Size = 7 },
		func(s *Schema) { s.Kinds[1].ID = 3 },
		func(s *Schema) {
			s.Kinds[0].Fields[0], s.Kinds[0].Fields[1] = s.Kinds[0].Fields[1], s.Kinds[0].Fields[0]
		},
		func(s *Schema) { s.Kinds = s.Kinds[:3] },
	} {
		e := testSchema()
		edit(e)
		if e.Hash() == h {
			t.Errorf("edit %d did not change the hash", i)
		}
	}
}

// TestFieldValues: every type stores and reads back its values, and refuses values of another
// type or out of its range.
func TestFieldValues(t *testing.T) {
	l := testSchema().MustCompile()
	p := l.Kind(1)
	if l.Stride() != 7 || p.Words != 7 || l.Kind(9).Words != 0 || l.Kind(3) != nil || !l.HasFields() {
		t.Fatalf("layout: stride %d, player words %d", l.Stride(), p.Words)
	}
	w := make([]uint32, l.Stride())
	health, ammo, team, crouched, score, name := p.Field("health"), p.Field("ammo"), p.Field("team"), p.Field("crouched"), p.Field("score"), p.Field("name")
	if health.Width != 8 || ammo.Width != 8 || team.Width != 2 || crouched.Width != 1 || score.Width != 16 || name.Width != 48 {
		t.Fatalf("widths %d %d %d %d %d %d", health.Width, ammo.Width, team.Width, crouched.Width, score.Width, name.Width)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(health.PutFloat(w, 73.3))
	must(ammo.PutUint(w, 255))
	must(team.PutEnum(w, 2))
	must(crouched.PutBool(w, true))
	must(score.PutInt(w, -32768))
	must(name.PutBytes(w, []byte("Ada!\x00z")))
	if health.Float(w) != 73.5 || ammo.Uint(w) != 255 || crouched.Bool(w) != true || score.Int(w) != -32768 ||
		string(name.Bytes(nil, w)) != "Ada!\x00z" {
		t.Fatalf("read back %v %d %v %d %q", health.Float(w), ammo.Uint(w), crouched.Bool(w), score.Int(w), name.Bytes(nil, w))
	}
	if i, v := team.Enum(w); i != 2 || v != "green" {
		t.Fatalf("enum %d %q", i, v)
	}
	must(health.PutFloat(w, 1e9)) // clamped
	if health.Float(w) != 100 {
		t.Fatalf("a float over its range reads %v", health.Float(w))
	}
	before := slices.Clone(w)
	for i, err := range []error{
		ammo.PutUint(w, 256), score.PutInt(w, 32768), team.PutEnum(w, 3), team.PutEnum(w, -1),
		health.PutFloat(w, math.NaN()), name.PutBytes(w, []byte("short")), ammo.PutInt(w, 1), health.PutUint(w, 1),
	} {
		if !errors.Is(err, ErrFieldRange) && !errors.Is(err, ErrFieldType) {
			t.Errorf("bad value %d: %v", i, err)
		}
	}
	if !slices.Equal(w, before) {
		t.Fatal("a refused value changed the fields")
	}
}

// randFields fills the kind's fields with random values of their ranges.
func randFields(rng *rand.Rand, k *KindLayout, w []uint32) {
	for i := range k.Fields {
		f := &k.Fields[i]
		switch f.Type {
		case FieldUint:
			_ = f.PutUint(w, rng.Uint64()>>(64-uint(f.Width)))
		case FieldInt:
			_ = f.PutInt(w, int64(rng.Uint64())>>(64-uint(f.Width)))
		case FieldBool:
			_ = f.PutBool(w, rng.IntN(2) == 1)
		case FieldEnum:
			_ = f.PutEnum(w, rng.IntN(len(f.Values)))
		case FieldFloat:
			_ = f.PutFloat(w, f.Min+rng.Float64()*(f.Max-f.Min))
		case FieldBytes:
			b := make([]byte, f.Size)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			_ = f.PutBytes(w, b)
		}
	}
}

// TestFieldRecordsRoundTrip: spawns and deltas of every kind, with random fields, some changed,
// decode to what was encoded; an entity whose fields did not change costs one bit of fields
// section, a schema without fields none.
func TestFieldRecordsRoundTrip(t *testing.T) {
	l := testSchema().MustCompile()
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 1400)
	var enc SnapshotEncoder
	enc.SetLayout(l)
	var dec Snapshot
	for round := range 300 {
		type sent struct {
			id           uint16
			kind         uint8
			base, cur    State
			bfields, cfs []uint32
			spawn        bool
		}
		var recs []sent
		h := SnapshotHeader{Tick: 100 + uint32(round), Seq: uint16(round), Flags: FlagInputAck, InputSeq: uint16(round * 7)}
		enc.Begin(buf, &h)
		for i := range 8 {
			kinds := []uint8{1, 2, 7, 9}
			k := l.Kind(kinds[rng.IntN(len(kinds))])
			r := sent{id: uint16(rng.IntN(MaxEntities)), kind: k.ID, spawn: i%3 == 0,
				bfields: make([]uint32, l.Stride()), cfs: make([]uint32, l.Stride())}
			r.base, r.cur = randState(rng), randState(rng)
			r.base, r.cur = onlyParts(r.base, k.Parts), onlyParts(r.cur, k.Parts)
			randFields(rng, k, r.bfields)
			copy(r.cfs, r.bfields)
			if rng.IntN(2) == 0 {
				randFields(rng, k, r.cfs)
			}
			var ok bool
			if r.spawn {
				ok = enc.Spawn(r.id, r.kind, &r.cur, r.cfs)
			} else {
				ok = enc.Delta(r.id, 3, r.kind, &r.base, &r.cur, r.bfields, r.cfs)
			}
			if !ok {
				t.Fatalf("record %d did not fit", i)
			}
			recs = append(recs, r)
		}
		pkt := enc.Finish()
		if err := l.DecodeSnapshot(pkt, &dec); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if dec.SnapshotHeader != h || len(dec.Records) != len(recs) {
			t.Fatalf("header %+v, %d records; want %+v, %d", dec.SnapshotHeader, len(dec.Records), h, len(recs))
		}
		for i, r := range recs {
			got := &dec.Records[i]
			k := l.Kind(r.kind)
			if got.ID != r.id {
				t.Fatalf("record %d id %d, want %d", i, got.ID, r.id)
			}
			if r.spawn {
				if got.Op != OpSpawn || got.Kind != r.kind || got.State != r.cur || !slices.Equal(got.Fields, r.cfs[:k.Words]) {
					t.Fatalf("spawn %d of %s: %+v, want state %+v fields %v", i, k.Name, got, r.cur, r.cfs[:k.Words])
				}
				continue
			}
			st, ok := got.Delta.Apply(&r.base)
			out := make([]uint32, l.Stride())
			if !ok || st != r.cur || !l.ApplyFields(pkt, got, r.kind, r.bfields, out) || !slices.Equal(out, r.cfs) {
				t.Fatalf("delta %d of %s: state %+v (%v), fields %v; want %+v, %v", i, k.Name, st, ok, out, r.cur, r.cfs)
			}
			if slices.Equal(r.bfields, r.cfs) != (got.FieldsBits == 0) {
				t.Fatalf("delta %d: fields unchanged %v, section of %d bits", i, slices.Equal(r.bfields, r.cfs), got.FieldsBits)
			}
		}
	}
	// The cost of an unchanged entity's fields: one bit with fields in the schema, none without.
	var with, without RecordBits
	s, f := State{}, make([]uint32, l.Stride())
	l.DeltaRecord(5, 1, 1, &s, &s, f, f, &with)
	DeltaRecord(5, 1, &s, &s, &without)
	if with.N != without.N+1 {
		t.Fatalf("an unchanged delta takes %d bits with fields in the schema, %d without", with.N, without.N)
	}
}

// onlyParts zeroes the parts of s a kind does not have, as a decoded spawn has them.
func onlyParts(s State, p Parts) State {
	if p&PartPosition == 0 {
		s.Pos = [3]int32{}
	}
	if p&PartRotation == 0 {
		s.Rot = 0
	}
	if p&PartVelocity == 0 {
		s.Vel = [3]int16{}
	}
	return s
}

// TestFieldsRefusedWhenMalformed: a spawn of a kind the schema lacks, a field value beyond its
// range, and a fields section that does not match the entity's kind are refused.
func TestFieldsRefusedWhenMalformed(t *testing.T) {
	l := testSchema().MustCompile()
	buf := make([]byte, 200)
	var enc SnapshotEncoder
	enc.SetLayout(l)
	var dec Snapshot
	s := State{}
	// Kind 3 is not in the schema; the encoder of a schema where it is writes it.
	other := &Schema{Kinds: []KindSchema{{ID: 3, Name: "x", Parts: Transform}}}
	var e2 SnapshotEncoder
	e2.SetLayout(other.MustCompile())
	e2.Begin(buf, &SnapshotHeader{Tick: 1})
	e2.Spawn(1, 3, &s, nil)
	if err := l.DecodeSnapshot(e2.Finish(), &dec); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a spawn of an unknown kind: %v", err)
	}
	// A team of value 3, beyond the enum's three values: written as a uint of the schema twin.
	twin := testSchema()
	twin.Kinds[0].Fields[2] = Uint("team", 2)
	tl := twin.MustCompile()
	w := make([]uint32, tl.Stride())
	_ = tl.Kind(1).Field("team").PutUint(w, 3)
	var e3 SnapshotEncoder
	e3.SetLayout(tl)
	e3.Begin(buf, &SnapshotHeader{Tick: 1})
	e3.Spawn(1, 1, &s, w)
	if err := l.DecodeSnapshot(e3.Finish(), &dec); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an enum value out of range: %v", err)
	}
	// A delta of a player's fields applied to a pickup, which has fewer fields.
	base, cur := make([]uint32, l.Stride()), make([]uint32, l.Stride())
	cur[0] = 9
	enc.Begin(buf, &SnapshotHeader{Tick: 2})
	enc.Delta(1, 1, 1, &s, &s, base, cur)
	pkt := enc.Finish()
	if err := l.DecodeSnapshot(pkt, &dec); err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, l.Stride())
	if l.ApplyFields(pkt, &dec.Records[0], 2, base, out) || !slices.Equal(out, base) {
		t.Fatal("a player's fields section applied to a pickup")
	}
	if !l.ApplyFields(pkt, &dec.Records[0], 1, base, out) || out[0] != 9 {
		t.Fatal("the player's fields section did not apply to a player")
	}
}

// TestSchemaJSON: the JSON form round-trips to the same schema (the same hash), and a bad
// document is refused with the kind and the field named.
func TestSchemaJSON(t *testing.T) {
	s := testSchema()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Schema
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Hash() != s.Hash() || !reflect.DeepEqual(back.Canonical(), s.Canonical()) {
		t.Fatalf("the schema did not round-trip:\n%s", b)
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"kinds": [{"id": 1, "name": "a", "parts": ["position", "spin"], "fields": []}]}`, `kind "a": unknown transform part "spin"`},
		{`{"kinds": [{"id": 1, "name": "a", "parts": [], "fields": [{"name": "x", "type": "complex"}]}]}`, `kind "a", field "x": unknown type "complex"`},
		{`{"kinds": [{"id": 1, "name": "a", "parts": [], "fields": [{"name": "x", "type": "uint", "bits": 4, "width": 5}]}]}`, `kind "a", field "x": width 5`},
		{`{"kinds": [{"id": 1, "name": "a", "parts": [], "fields": [{"name": "x", "type": "uint", "bits": 40}]}]}`, `kind "a", field "x": uint of 40 bits`},
		{`{"kinds": [{"id": 1, "name": "a", "parts": [], "fields": [{"name": "x", "type": "bool"}, {"name": "x", "type": "bool"}]}]}`, `kind "a", field "x": a second field`},
		{`{"kinds": [{"id": 1, "name": "a", "colour": "red"}]}`, `unknown field "colour"`},
	} {
		var got Schema
		err := json.Unmarshal([]byte(tc.doc), &got)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.doc, err, tc.want)
		}
	}
}
