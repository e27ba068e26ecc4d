package protocol

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func randState(rng *rand.Rand) State {
	var s State
	for i := range 3 {
		s.Pos[i] = int32(rng.IntN(PosMax-PosMin+1)) + PosMin
		if rng.IntN(3) > 0 {
			s.Vel[i] = int16(rng.IntN(VelMax-VelMin+1) + VelMin)
		}
	}
	s.Rot = rng.Uint32()
	return s
}

// nudge returns s changed the way a moving entity changes: small steps on some fields, an
// occasional large jump or new rotation.
func nudge(rng *rand.Rand, s State) State {
	step := func(v, lo, hi, scale int32) int32 {
		switch rng.IntN(4) {
		case 0:
			return v
		case 1:
			v += int32(rng.IntN(2*int(scale)+1)) - scale
		default:
			v += int32(rng.IntN(int(hi-lo)/4)) - (hi-lo)/8
		}
		return max(lo, min(hi, v))
	}
	for i := range 3 {
		s.Pos[i] = step(s.Pos[i], PosMin, PosMax, 20)
		s.Vel[i] = int16(step(int32(s.Vel[i]), VelMin, VelMax, 10))
	}
	switch rng.IntN(4) {
	case 0:
		s.Rot = rng.Uint32()
	case 1:
		for i := range 3 {
			shift := uint(i) * RotComponentBits
			c := int32(s.Rot>>shift&rotComponentMax) + int32(rng.IntN(9)) - 4
			c = max(0, min(rotComponentMax, c))
			s.Rot = s.Rot&^(rotComponentMax<<shift) | uint32(c)<<shift
		}
	}
	return s
}

type sentRecord struct {
	op         Op
	id         uint16
	kind       uint8
	age        uint32
	base, want State
}

// TestSnapshotRoundTrip encodes random records until the packet is full and checks that the
// decoder returns exactly what was written and that every delta applied to its baseline gives
// the encoded state.
func TestSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var enc SnapshotEncoder
	var dec Snapshot
	for iter := range 300 {
		size := MinSnapshotBytes + rng.IntN(1400)
		buf := make([]byte, size)
		h := SnapshotHeader{Tick: rng.Uint32(), ServerTimeMs: rng.Uint32(), Seq: uint16(rng.Uint32()), Flags: uint8(rng.IntN(4))}
		if !enc.Begin(buf, &h) {
			t.Fatalf("Begin refused %d bytes", size)
		}
		var sent []sentRecord
		for {
			rec := sentRecord{op: Op(rng.IntN(3)), id: uint16(rng.Uint32())}
			if rng.IntN(2) == 0 {
				rec.id %= 4096
			}
			var ok bool
			switch rec.op {
			case OpSpawn:
				rec.kind = uint8(rng.Uint32())
				rec.want = randState(rng)
				ok = enc.Spawn(rec.id, rec.kind, &rec.want, nil)
			case OpDelta:
				rec.age = uint32(rng.IntN(MaxBaselineAge)) + 1
				rec.base = randState(rng)
				rec.want = nudge(rng, rec.base)
				ok = enc.Delta(rec.id, rec.age, 0, &rec.base, &rec.want, nil, nil)
			case OpDespawn:
				ok = enc.Despawn(rec.id)
			}
			if !ok {
				break
			}
			sent = append(sent, rec)
		}
		if enc.RoomBits() >= MaxSpawnBits {
			t.Fatalf("iteration %d: a record was refused with %d bits of room", iter, enc.RoomBits())
		}
		if enc.Records() != len(sent) {
			t.Fatalf("iteration %d: Records() = %d, wrote %d", iter, enc.Records(), len(sent))
		}
		pkt := enc.Finish()
		if len(pkt) > size {
			t.Fatalf("iteration %d: packet of %d bytes in a %d-byte buffer", iter, len(pkt), size)
		}
		SetSnapshotFlags(pkt, FlagLast)
		h.Flags |= FlagLast
		if err := DecodeSnapshot(pkt, &dec); err != nil {
			t.Fatalf("iteration %d: DecodeSnapshot: %v", iter, err)
		}
		if dec.SnapshotHeader != h {
			t.Fatalf("iteration %d: header %+v, want %+v", iter, dec.SnapshotHeader, h)
		}
		if len(dec.Records) != len(sent) {
			t.Fatalf("iteration %d: decoded %d records, want %d", iter, len(dec.Records), len(sent))
		}
		for i, want := range sent {
			got := &dec.Records[i]
			if got.Op != want.op || got.ID != want.id {
				t.Fatalf("iteration %d record %d: op %d id %d, want op %d id %d", iter, i, got.Op, got.ID, want.op, want.id)
			}
			switch want.op {
			case OpSpawn:
				if got.Kind != want.kind || got.State != want.want {
					t.Fatalf("iteration %d record %d: spawn %d %+v, want %d %+v", iter, i, got.Kind, got.State, want.kind, want.want)
				}
			case OpDelta:
				if got.BaselineTick != h.Tick-want.age {
					t.Fatalf("iteration %d record %d: baseline tick %d, want %d", iter, i, got.BaselineTick, h.Tick-want.age)
				}
				s, ok := got.Delta.Apply(&want.base)
				if !ok || s != want.want {
					t.Fatalf("iteration %d record %d: delta applies to %+v (%v), want %+v", iter, i, s, ok, want.want)
				}
			}
		}
	}
}

// TestDeltaSizes pins the cost of the common cases: an unchanged entity and a walking one.
func TestDeltaSizes(t *testing.T) {
	base := State{Pos: [3]int32{1000, -2000, 0}, Rot: YawRotation(1), Vel: [3]int16{64, 0, 0}}
	walked := base
	walked.Pos[0] += 20
	walked.Pos[1] -= 3
	turned := walked
	turned.Rot = YawRotation(1.01)
	tests := []struct {
		name string
		cur  State
		bits int
	}{
		{"unchanged", base, 15 + 5 + 3},
		{"walked", walked, 15 + 5 + 1 + 11 + 6 + 1 + 1 + 1},
		{"walked and turned", turned, 15 + 5 + 1 + 11 + 6 + 1 + 2 + 3*4 + 1},
	}
	buf := make([]byte, 64)
	for _, tt := range tests {
		var enc SnapshotEncoder
		enc.Begin(buf, &SnapshotHeader{Tick: 100})
		before := enc.RoomBits()
		if !enc.Delta(7, 3, 0, &base, &tt.cur, nil, nil) {
			t.Fatalf("%s: record refused", tt.name)
		}
		if got := before - enc.RoomBits(); got != tt.bits {
			t.Errorf("%s: %d bits, want %d", tt.name, got, tt.bits)
		}
	}
}

func TestSnapshotEncoderRefusals(t *testing.T) {
	var enc SnapshotEncoder
	if enc.Begin(make([]byte, MinSnapshotBytes-1), &SnapshotHeader{}) {
		t.Fatal("Begin accepted a buffer below MinSnapshotBytes")
	}
	if !enc.Begin(make([]byte, MinSnapshotBytes), &SnapshotHeader{}) {
		t.Fatal("Begin refused MinSnapshotBytes")
	}
	s := State{}
	if enc.Despawn(1) || enc.Spawn(1, 1, &s, nil) {
		t.Fatal("a record fit in a packet with room for the end op only")
	}
	var dec Snapshot
	if err := DecodeSnapshot(enc.Finish(), &dec); err != nil || len(dec.Records) != 0 {
		t.Fatalf("empty packet: %d records, %v", len(dec.Records), err)
	}
	enc.Begin(make([]byte, 100), &SnapshotHeader{Tick: 5})
	for _, age := range []uint32{0, MaxBaselineAge + 1} {
		if enc.Delta(1, age, 0, &s, &s, nil, nil) {
			t.Errorf("Delta accepted age %d", age)
		}
	}
	if enc.Records() != 0 {
		t.Fatal("a refused record was counted")
	}
}

func TestDeltaApplyRange(t *testing.T) {
	base := State{Pos: [3]int32{PosMax, 0, 0}, Vel: [3]int16{VelMin, 0, 0}, Rot: 0}
	tests := []struct {
		name string
		d    Delta
	}{
		{"pos", Delta{Changed: DeltaPosX, Pos: [3]int32{1, 0, 0}}},
		{"vel", Delta{Changed: DeltaVelX, Vel: [3]int16{-1, 0, 0}}},
		{"rot", Delta{Changed: DeltaRotSmall, RotD: [3]int16{0, 0, -1}}},
	}
	for _, tt := range tests {
		if _, ok := tt.d.Apply(&base); ok {
			t.Errorf("%s: out-of-range delta applied", tt.name)
		}
	}
}

// samplePacket is a real packet with every kind of record.
func samplePacket() []byte {
	rng := rand.New(rand.NewPCG(7, 8))
	var enc SnapshotEncoder
	enc.Begin(make([]byte, 1200), &SnapshotHeader{Tick: 1000, ServerTimeMs: 123456, Seq: 77, Flags: FlagLast})
	for i := range 12 {
		base := randState(rng)
		cur := nudge(rng, base)
		switch i % 3 {
		case 0:
			enc.Spawn(uint16(i*5000), uint8(i), &cur, nil)
		case 1:
			enc.Delta(uint16(i), uint32(i*40+1), 0, &base, &cur, nil, nil)
		case 2:
			enc.Despawn(uint16(i))
		}
	}
	return enc.Finish()
}

func TestDecodeSnapshotMalformed(t *testing.T) {
	pkt := samplePacket()
	var dec Snapshot
	for n := range len(pkt) {
		if err := DecodeSnapshot(pkt[:n], &dec); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(pkt))
		}
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"trailing byte", append(append([]byte{}, pkt...), 0), ErrTrailing},
		{"unknown flag", func() []byte { b := append([]byte{}, pkt...); b[snapshotFlagsOffset] |= 0x80; return b }(), ErrInvalid},
		{"header only", pkt[:SnapshotHeaderBytes], ErrTruncated},
		{"wrong type", AppendPing(nil, &Ping{}), ErrType},
	}
	for _, tt := range tests {
		if err := DecodeSnapshot(tt.in, &dec); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestSnapshotEncodeDecodeAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	states := make([]State, 200)
	for i := range states {
		states[i] = randState(rng)
	}
	buf := make([]byte, 1200)
	var enc SnapshotEncoder
	var dec Snapshot
	run := func() {
		enc.Begin(buf, &SnapshotHeader{Tick: 50})
		for i := 1; i < len(states); i++ {
			if !enc.Delta(uint16(i), 2, 0, &states[i-1], &states[i], nil, nil) && !enc.Despawn(uint16(i)) {
				break
			}
		}
		if err := DecodeSnapshot(enc.Finish(), &dec); err != nil {
			t.Fatal(err)
		}
	}
	run() // grows dec.Records once
	if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
		t.Fatalf("%v allocations per packet, want 0", allocs)
	}
}
