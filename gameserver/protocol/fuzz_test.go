package protocol

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// The seed corpus of every fuzz target is checked in under testdata/fuzz/<target>: real encoded
// messages of each kind. Run a target with e.g. `go test -fuzz FuzzDecodeSnapshot`.

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(samplePacket())
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Snapshot
		if err := DecodeSnapshot(b, &s); err != nil {
			return
		}
		var zero State
		for i := range s.Records {
			r := &s.Records[i]
			if r.Op > OpDespawn {
				t.Fatalf("record %d has op %d", i, r.Op)
			}
			if r.Op == OpDelta && (s.Tick-r.BaselineTick == 0 || s.Tick-r.BaselineTick > MaxBaselineAge) {
				t.Fatalf("record %d names baseline %d at tick %d", i, r.BaselineTick, s.Tick)
			}
			r.Delta.Apply(&zero)
		}
	})
}

// The control messages have one encoding each, so a decoded message must encode back to its
// input.

func FuzzDecodeAck(f *testing.F) {
	f.Add(AppendAck(nil, sampleAck()))
	f.Fuzz(func(t *testing.T, b []byte) {
		var a Ack
		if DecodeAck(b, &a) != nil {
			return
		}
		if out := AppendAck(nil, &a); !bytes.Equal(out, b) {
			t.Fatalf("re-encoded % x, input % x", out, b)
		}
	})
}

func FuzzDecodePing(f *testing.F) {
	f.Add(AppendPing(nil, &Ping{ClientTimeMs: 1, LastAppliedTick: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Ping
		if DecodePing(b, &p) != nil {
			return
		}
		if out := AppendPing(nil, &p); !bytes.Equal(out, b) {
			t.Fatalf("re-encoded % x, input % x", out, b)
		}
	})
}

func FuzzDecodeCommand(f *testing.F) {
	seed, err := AppendCommand(nil, &Command{Seq: 1, Tick: 2, Payload: []byte("move")})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if DecodeCommand(b, &c) != nil {
			return
		}
		out, err := AppendCommand(nil, &c)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("re-encoded % x (%v), input % x", out, err, b)
		}
	})
}

func FuzzDecodeReset(f *testing.F) {
	f.Add(AppendReset(nil, &Reset{Tick: 99}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Reset
		if DecodeReset(b, &r) != nil {
			return
		}
		if out := AppendReset(nil, &r); !bytes.Equal(out, b) {
			t.Fatalf("re-encoded % x, input % x", out, b)
		}
	})
}

// FuzzDecodeSchemaSnapshot decodes any bytes as a SNAPSHOT of the test schema, and applies every
// delta's fields section to a zero baseline of every kind: nothing may panic, and what decodes
// holds only values within the fields' ranges.
func FuzzDecodeSchemaSnapshot(f *testing.F) {
	l := testSchema().MustCompile()
	for _, v := range goldenCases(l) {
		if v.Snapshot != nil {
			b, _ := hex.DecodeString(v.Hex)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Snapshot
		if err := l.DecodeSnapshot(b, &s); err != nil {
			return
		}
		base, out := make([]uint32, l.Stride()), make([]uint32, l.Stride())
		for i := range s.Records {
			r := &s.Records[i]
			switch r.Op {
			case OpSpawn:
				k := l.Kind(r.Kind)
				if k == nil || len(r.Fields) != k.Words {
					t.Fatalf("record %d: a spawn of kind %d with %d field words", i, r.Kind, len(r.Fields))
				}
				checkRanges(t, k, r.Fields)
			case OpDelta:
				for _, k := range l.Schema().Kinds {
					if l.ApplyFields(b, r, k.ID, base, out) {
						checkRanges(t, l.Kind(k.ID), out)
					}
				}
			}
		}
	})
}

func checkRanges(t *testing.T, k *KindLayout, words []uint32) {
	t.Helper()
	for i := range k.Fields {
		f := &k.Fields[i]
		switch v := words[f.Word]; {
		case f.Type == FieldEnum && int(v) >= len(f.Values), f.Type == FieldFloat && float64(v) > f.steps(),
			f.Width < 32 && f.Type != FieldBytes && v>>uint(f.Width) != 0:
			t.Fatalf("field %s holds %d, beyond its range", f.Name, v)
		}
	}
}

func FuzzDecodeHello(f *testing.F) {
	plain, _ := AppendHello(nil, &Hello{SchemaHash: 0x1234})
	f.Add(plain)
	withToken, _ := AppendHello(nil, &Hello{SchemaHash: 0x1234, Token: []byte("token")})
	f.Add(withToken)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Hello
		if DecodeHello(b, &h) != nil {
			return
		}
		if got, err := AppendHello(nil, &h); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("HELLO % x re-encodes as % x", b, got)
		}
	})
}

func FuzzDecodeClose(f *testing.F) {
	f.Add(AppendClose(nil, &Close{Code: CloseSchema, Reason: "schema mismatch"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Close
		if DecodeClose(b, &c) != nil {
			return
		}
		if got := AppendClose(nil, &c); !bytes.Equal(got, b) {
			t.Fatalf("CLOSE % x re-encodes as % x", b, got)
		}
	})
}
