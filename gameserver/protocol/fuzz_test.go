package protocol

import (
	"bytes"
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
