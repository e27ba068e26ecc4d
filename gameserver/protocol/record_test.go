package protocol

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// fieldSpawn and fieldDelta write records field by field, straight from the format's
// description in the package doc, with one WriteBits per field. The record encoders gather
// fields into words; the two must produce the same bits.
func fieldSpawn(w *BitWriter, id uint16, kind uint8, s *State) {
	fieldOpID(w, OpSpawn, id)
	w.WriteBits(uint64(kind), 8)
	for i := range 3 {
		w.WriteBits(uint64(s.Pos[i]-PosMin), PosBits)
	}
	w.WriteBits(uint64(s.Rot), 32)
	if s.Vel == [3]int16{} {
		w.WriteBits(0, 1)
		return
	}
	w.WriteBits(1, 1)
	for i := range 3 {
		w.WriteBits(uint64(int32(s.Vel[i])-VelMin), VelBits)
	}
}

func fieldOpID(w *BitWriter, op Op, id uint16) {
	w.WriteBits(uint64(op), 2)
	if id < 1<<12 {
		w.WriteBits(0, 1)
		w.WriteBits(uint64(id), 12)
		return
	}
	w.WriteBits(1, 1)
	w.WriteBits(uint64(id), 16)
}

// fieldCode writes a changed field's difference: '1', then width i as i '1's and a closing '0'
// (none after the last width), then the zigzag value in that width.
func fieldCode(w *BitWriter, d int32, widths []uint) {
	z := uint64(Zigzag(d))
	w.WriteBits(1, 1)
	for i, wd := range widths {
		if z < 1<<wd {
			w.WriteBits(1<<i-1, uint(i))
			if i < len(widths)-1 {
				w.WriteBits(0, 1)
			}
			w.WriteBits(z, wd)
			return
		}
	}
}

func fieldDelta(w *BitWriter, id uint16, age uint32, base, cur *State) {
	fieldOpID(w, OpDelta, id)
	if age-1 < 16 {
		w.WriteBits(0, 1)
		w.WriteBits(uint64(age-1), 4)
	} else {
		w.WriteBits(1, 1)
		w.WriteBits(uint64(age-1), 10)
	}
	if base.Pos == cur.Pos {
		w.WriteBits(0, 1)
	} else {
		w.WriteBits(1, 1)
		for i := range 3 {
			if d := cur.Pos[i] - base.Pos[i]; d == 0 {
				w.WriteBits(0, 1)
			} else {
				fieldCode(w, d, posWidths[:])
			}
		}
	}
	if base.Rot == cur.Rot {
		w.WriteBits(0, 1)
	} else {
		w.WriteBits(1, 1)
		const top = 3 * RotComponentBits
		small := base.Rot>>top == cur.Rot>>top
		var d [3]int32
		bits := uint(0)
		for i := range 3 {
			shift := uint(2-i) * RotComponentBits
			d[i] = int32(cur.Rot>>shift&rotComponentMax) - int32(base.Rot>>shift&rotComponentMax)
			switch z := Zigzag(d[i]); {
			case z < 1<<3:
				bits += 4
			case z < 1<<6:
				bits += 8
			default:
				bits += 13
			}
		}
		if small && 2+bits < 34 {
			w.WriteBits(1, 1)
			for i := range 3 {
				z := uint64(Zigzag(d[i]))
				switch {
				case z < 1<<3:
					w.WriteBits(0, 1)
					w.WriteBits(z, 3)
				case z < 1<<6:
					w.WriteBits(0b01, 2)
					w.WriteBits(z, 6)
				default:
					w.WriteBits(0b11, 2)
					w.WriteBits(z, 11)
				}
			}
		} else {
			w.WriteBits(0, 1)
			w.WriteBits(uint64(cur.Rot), 32)
		}
	}
	if base.Vel == cur.Vel {
		w.WriteBits(0, 1)
		return
	}
	w.WriteBits(1, 1)
	for i := range 3 {
		if d := int32(cur.Vel[i]) - int32(base.Vel[i]); d == 0 {
			w.WriteBits(0, 1)
		} else {
			fieldCode(w, d, velWidths[:])
		}
	}
}

// extremeState has every field at a bound, so differences take the widest codes.
func extremeState(rng *rand.Rand) State {
	pick := func(lo, hi int32) int32 {
		if rng.IntN(2) == 0 {
			return lo
		}
		return hi
	}
	var s State
	for i := range 3 {
		s.Pos[i] = pick(PosMin, PosMax)
		s.Vel[i] = int16(pick(VelMin, VelMax))
	}
	s.Rot = rng.Uint32()
	return s
}

// TestRecordEncodersMatchFieldEncoding: every record, and every packet filled with records until
// one does not fit, is bit for bit what the field-by-field encoding gives; the widest delta is
// MaxTransformDeltaBits.
func TestRecordEncodersMatchFieldEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	widest := uint(0)
	for round := range 2000 {
		var base, cur State
		switch round % 3 {
		case 0:
			base, cur = randState(rng), randState(rng)
		case 1:
			base = randState(rng)
			cur = nudge(rng, base)
		default:
			base, cur = extremeState(rng), extremeState(rng)
		}
		id := uint16(rng.IntN(MaxEntities))
		age := uint32(rng.IntN(MaxBaselineAge)) + 1
		kind := uint8(rng.IntN(256))

		var r RecordBits
		if !DeltaRecord(id, age, &base, &cur, &r) {
			t.Fatalf("DeltaRecord refused age %d", age)
		}
		widest = max(widest, r.N)
		checkRecord(t, &r, func(w *BitWriter) { fieldDelta(w, id, age, &base, &cur) })
		SpawnRecord(id, kind, &cur, &r)
		checkRecord(t, &r, func(w *BitWriter) { fieldSpawn(w, id, kind, &cur) })
	}
	var r RecordBits
	lo, hi := State{Pos: [3]int32{PosMin, PosMin, PosMin}, Rot: 0, Vel: [3]int16{VelMin, VelMin, VelMin}},
		State{Pos: [3]int32{PosMax, PosMax, PosMax}, Rot: 3 << 30, Vel: [3]int16{VelMax, VelMax, VelMax}}
	DeltaRecord(MaxEntities-1, MaxBaselineAge, &lo, &hi, &r)
	if r.N != MaxTransformDeltaBits || widest > MaxTransformDeltaBits {
		t.Fatalf("widest delta %d bits (random %d), MaxTransformDeltaBits %d", r.N, widest, MaxTransformDeltaBits)
	}

	// Whole packets: records appended until one does not fit, through the encoder's methods and
	// through Append of pre-encoded records, against the field encoding.
	for _, size := range []int{MinSnapshotBytes, 40, 300, 1200} {
		h := SnapshotHeader{Tick: 5000, ServerTimeMs: 77, Seq: 9, Flags: FlagLast}
		var direct, appended SnapshotEncoder
		bufD, bufA := make([]byte, size), make([]byte, size)
		direct.Begin(bufD, &h)
		appended.Begin(bufA, &h)
		var ref BitWriter
		refBuf := make([]byte, size)
		ref.Reset(refBuf)
		fieldHeader(&ref, &h)
		ref.SetLimit(size*8 - 2)
		for i := 0; ; i++ {
			base := randState(rng)
			cur := nudge(rng, base)
			id := uint16(rng.IntN(MaxEntities))
			m := ref.Mark()
			var ok, okA bool
			switch i % 3 {
			case 0:
				ok = direct.Delta(id, 4, 0, &base, &cur, nil, nil)
				DeltaRecord(id, 4, &base, &cur, &r)
				okA = appended.Append(&r)
				fieldDelta(&ref, id, 4, &base, &cur)
			case 1:
				ok = direct.Spawn(id, 3, &cur, nil)
				SpawnRecord(id, 3, &cur, &r)
				okA = appended.Append(&r)
				fieldSpawn(&ref, id, 3, &cur)
			default:
				ok = direct.Despawn(id)
				okA = ok
				if okA {
					appended.Despawn(id)
				}
				fieldOpID(&ref, OpDespawn, id)
			}
			okRef := !ref.Overflow()
			if ok != okRef || okA != okRef {
				t.Fatalf("packet %d, record %d: fit %v (appended %v), field encoding %v", size, i, ok, okA, okRef)
			}
			if !okRef {
				ref.Rewind(m)
				break
			}
		}
		ref.SetLimit(ref.BitLen() + 2)
		ref.WriteBits(uint64(opEnd), 2)
		want := ref.Bytes()
		if got := direct.Finish(); !bytes.Equal(got, want) {
			t.Fatalf("packet of %d bytes through Delta/Spawn:\n% x\nwant\n% x", size, got, want)
		}
		if got := appended.Finish(); !bytes.Equal(got, want) {
			t.Fatalf("packet of %d bytes through Append:\n% x\nwant\n% x", size, got, want)
		}
	}
}

func fieldHeader(w *BitWriter, h *SnapshotHeader) {
	w.WriteBits(typeByte(MsgSnapshot), 8)
	w.WriteBits(uint64(h.Tick), 32)
	w.WriteBits(uint64(h.ServerTimeMs), 32)
	w.WriteBits(uint64(h.Seq), 16)
	w.WriteBits(uint64(h.Flags), 8)
}

// checkRecord compares a record with the field encoding, at every alignment of the packet's
// bit position.
func checkRecord(t *testing.T, r *RecordBits, field func(*BitWriter)) {
	t.Helper()
	for lead := range uint(64) {
		got, want := make([]byte, 64), make([]byte, 64)
		var gw, ww BitWriter
		gw.Reset(got)
		ww.Reset(want)
		gw.WriteBits(0x5555555555555555, lead)
		ww.WriteBits(0x5555555555555555, lead)
		if !gw.writeWords(r.W[:], r.N) {
			t.Fatalf("record of %d bits did not fit", r.N)
		}
		field(&ww)
		if gw.BitLen() != ww.BitLen() || !bytes.Equal(gw.Bytes(), ww.Bytes()) {
			t.Fatalf("after %d bits: record %d bits % x, field encoding %d bits % x", lead, gw.BitLen()-int(lead), gw.Bytes(), ww.BitLen()-int(lead), ww.Bytes())
		}
	}
}

// TestAppendRefusesWithoutWriting: a record that does not fit leaves the packet as it was, and
// one with more bits than any record is refused.
func TestAppendRefusesWithoutWriting(t *testing.T) {
	var enc SnapshotEncoder
	buf := make([]byte, MinSnapshotBytes+2)
	enc.Begin(buf, &SnapshotHeader{Tick: 1})
	before := enc.RoomBits()
	r := RecordBits{N: uint(before) + 1}
	for i := range r.W {
		r.W[i] = ^uint64(0)
	}
	if enc.Append(&r) || enc.RoomBits() != before || enc.Records() != 0 {
		t.Fatalf("a record of %d bits was taken with %d bits of room", r.N, before)
	}
	r.N = MaxRecordBits + 1
	enc.Begin(make([]byte, 100), &SnapshotHeader{Tick: 1})
	if enc.Append(&r) {
		t.Fatal("a record over MaxRecordBits was taken")
	}
	// Bits above N are not written.
	r.N = 3
	if !enc.Append(&r) || !enc.Despawn(1) {
		t.Fatal("records refused in an empty packet")
	}
	var ref BitWriter
	ref.Reset(make([]byte, 100))
	fieldHeader(&ref, &SnapshotHeader{Tick: 1})
	ref.WriteBits(0b111, 3)
	fieldOpID(&ref, OpDespawn, 1)
	ref.WriteBits(uint64(opEnd), 2)
	if got, want := enc.Finish(), ref.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("% x, want % x", got, want)
	}
}

// TestAppendBitsRuns: a run of short records appended at once gives the bytes of appending them
// one by one, stopping at the same record, from every starting alignment and up to every end of
// the buffer; the records are deltas, or fields of every length from 1 to 64 bits.
func TestAppendBitsRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for round := range 600 {
		var recs []RecordBits
		var v []uint64
		var n []uint8
		for len(recs) < 400 {
			var r RecordBits
			if round%2 == 0 {
				base := randState(rng)
				cur := base
				for i := range 3 {
					cur.Pos[i] += int32(rng.IntN(41)) - 20
					if rng.IntN(8) == 0 {
						cur.Vel[i] += int16(rng.IntN(21)) - 10
					}
				}
				DeltaRecord(uint16(rng.IntN(MaxEntities)), uint32(rng.IntN(40))+1, &base, &cur, &r)
				if r.N > 64 {
					continue
				}
			} else {
				r.add(rng.Uint64(), uint(1+rng.IntN(64)))
			}
			recs = append(recs, r)
			v = append(v, r.W[0]|^(1<<r.N-1)) // bits above n are ignored
			n = append(n, uint8(r.N))
		}
		switch round % 10 {
		case 0:
			n[len(n)/2] = 65 // too long: the run stops there
		case 1:
			n[len(n)/3] = 0 // empty: the run stops there too
		}
		size := 20 + rng.IntN(1200)
		h := SnapshotHeader{Tick: uint32(round), Seq: 3}
		var one, run SnapshotEncoder
		one.Begin(make([]byte, size), &h)
		run.Begin(make([]byte, size), &h)
		lead := []uint8{uint8(1 + rng.IntN(63))}
		one.AppendBits(v, lead)
		run.AppendBits(v, lead)
		want := 0
		for want < len(n) && n[want]-1 < 64 && one.Append(&recs[want]) {
			want++
		}
		got := 0
		for got < len(n) {
			end := min(len(n), got+1+rng.IntN(40))
			k := run.AppendBits(v[got:end], n[got:end])
			got += k
			if k == 0 {
				break
			}
		}
		if got != want || one.Records() != run.Records() {
			t.Fatalf("round %d: run wrote %d records, one by one %d", round, got, want)
		}
		if a, b := one.Finish(), run.Finish(); !bytes.Equal(a, b) {
			t.Fatalf("round %d: run\n% x\none by one\n% x", round, b, a)
		}
	}
	var enc SnapshotEncoder
	enc.Begin(make([]byte, 100), &SnapshotHeader{})
	if enc.AppendBits([]uint64{1}, []uint8{1, 1}) != 1 {
		t.Fatal("a record without bits was written, or a record was left out")
	}
}
