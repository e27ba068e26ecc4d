package pacing

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzPacer drives a pacer with an arbitrary sequence of rate changes, refills (with clocks that
// jump and go backwards) and admissions, and checks that the budget stays finite and within its
// cap and that an unlimited pacer admits everything.
func FuzzPacer(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0x40, 0xc4, 0x40, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 2, 0xe8, 3, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var p Pacer
		rng := NewRand(1)
		now := int64(0)
		for i := 0; i+9 <= len(ops); i += 9 {
			arg := binary.LittleEndian.Uint64(ops[i+1:])
			switch ops[i] % 5 {
			case 0:
				p.SetRate(math.Float64frombits(arg))
			case 1:
				p.SetRate(RateFor(int(int32(arg)), math.Float64frombits(arg)))
			case 2:
				now += int64(arg)
				p.Refill(now)
			case 3:
				n := int(int64(arg))
				if ok := p.AdmitReliable(n); !ok && (p.Rate() == 0 || n <= 0) {
					t.Fatalf("AdmitReliable(%d) refused at rate %v", n, p.Rate())
				}
			case 4:
				n, backlog := int(int32(arg)), int(int32(arg>>32))
				if ok := p.AdmitUnreliable(n, backlog, rng.Uint32()); !ok && (p.Rate() == 0 || n <= 0) {
					t.Fatalf("AdmitUnreliable(%d, %d) refused at rate %v", n, backlog, p.Rate())
				}
			}
			r, b := p.Rate(), p.Budget()
			if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r > MaxRate {
				t.Fatalf("rate %v", r)
			}
			if math.IsNaN(b) || math.IsInf(b, 0) || b > r || (r == 0 && b != 0) {
				t.Fatalf("budget %v at rate %v", b, r)
			}
			if p.reserved < 0 || p.reserved > r {
				t.Fatalf("reserved %v at rate %v", p.reserved, r)
			}
		}
	})
}
