package protocol

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestBitWriterReaderRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type field struct {
		v uint64
		n uint
	}
	for iter := range 200 {
		var fields []field
		total := 0
		for total < 900 {
			n := uint(rng.IntN(32) + 1)
			fields = append(fields, field{rng.Uint64() & (1<<n - 1), n})
			total += int(n)
		}
		buf := make([]byte, (total+7)/8)
		var w BitWriter
		w.Reset(buf)
		for _, f := range fields {
			w.WriteBits(f.v, f.n)
		}
		if w.Overflow() {
			t.Fatalf("iteration %d: overflow writing %d bits into %d bytes", iter, total, len(buf))
		}
		out := w.Bytes()
		if len(out) != len(buf) {
			t.Fatalf("iteration %d: wrote %d bytes, want %d", iter, len(out), len(buf))
		}
		var r BitReader
		r.Reset(out)
		for i, f := range fields {
			if got := r.ReadBits(f.n); got != f.v {
				t.Fatalf("iteration %d field %d: read %#x, want %#x", iter, i, got, f.v)
			}
		}
		if r.Err() != nil || r.Remaining() >= 8 {
			t.Fatalf("iteration %d: err %v, %d bits left", iter, r.Err(), r.Remaining())
		}
	}
}

func TestBitWriterLittleEndianBytes(t *testing.T) {
	buf := make([]byte, 7)
	var w BitWriter
	w.Reset(buf)
	w.WriteBits(0x5, 4)
	w.WriteBits(0xa, 4)
	w.WriteBits(0x1234, 16)
	w.WriteBits(0xdeadbeef, 32)
	got := w.Bytes()
	want := []byte{0xa5, 0x34, 0x12, 0xef, 0xbe, 0xad, 0xde}
	if string(got) != string(want) {
		t.Fatalf("bytes % x, want % x", got, want)
	}
}

func TestBitWriterOverflowAndRewind(t *testing.T) {
	buf := make([]byte, 4)
	var w BitWriter
	w.Reset(buf)
	w.WriteBits(0xff, 8)
	m := w.Mark()
	w.WriteBits(0xffff, 16)
	w.WriteBits(0xff, 9) // 33 bits: does not fit
	if !w.Overflow() {
		t.Fatal("no overflow after writing past capacity")
	}
	w.WriteBits(1, 1) // dropped: the writer stays overflowed
	if !w.Overflow() || w.BitLen() != 24 {
		t.Fatalf("overflow %v, bit length %d; want true, 24", w.Overflow(), w.BitLen())
	}
	w.Rewind(m)
	if w.Overflow() || w.BitLen() != 8 {
		t.Fatalf("after rewind: overflow %v, bit length %d; want false, 8", w.Overflow(), w.BitLen())
	}
	w.WriteBits(0x0201, 16)
	w.WriteBits(0x3, 8)
	if got := w.Bytes(); string(got) != "\xff\x01\x02\x03" {
		t.Fatalf("bytes % x", got)
	}
	w.SetLimit(24)
	if w.Limit() != 24 {
		t.Fatalf("limit %d, want 24", w.Limit())
	}
	var zero BitWriter
	zero.WriteBits(1, 1)
	if !zero.Overflow() || len(zero.Bytes()) != 0 {
		t.Fatal("zero BitWriter accepted a write")
	}
}

func TestBitReaderLatchesTruncation(t *testing.T) {
	var r BitReader
	r.Reset([]byte{0xff, 0x01})
	if v := r.ReadBits(12); v != 0x1ff {
		t.Fatalf("read %#x, want 0x1ff", v)
	}
	if v := r.ReadBits(5); v != 0 || !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("read past end: %#x, err %v", v, r.Err())
	}
	if v := r.ReadBits(1); v != 0 || r.BitPos() != 12 {
		t.Fatalf("read after error: %#x at bit %d", v, r.BitPos())
	}
	r.Fail(ErrInvalid)
	if !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("Fail replaced the first error: %v", r.Err())
	}
	r.Reset(nil)
	if r.ReadBool() || r.Err() == nil {
		t.Fatal("empty reader read without error")
	}
}

func TestZigzag(t *testing.T) {
	tests := []struct {
		v int32
		u uint32
	}{{0, 0}, {-1, 1}, {1, 2}, {-2, 3}, {2, 4}, {1<<31 - 1, 1<<32 - 2}, {-1 << 31, 1<<32 - 1}}
	for _, tt := range tests {
		if got := Zigzag(tt.v); got != tt.u {
			t.Errorf("Zigzag(%d) = %d, want %d", tt.v, got, tt.u)
		}
		if got := Unzigzag(tt.u); got != tt.v {
			t.Errorf("Unzigzag(%d) = %d, want %d", tt.u, got, tt.v)
		}
	}
}
