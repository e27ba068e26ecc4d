package snapshot

import (
	"math/rand/v2"
	"testing"
)

// TestSlotIndex checks has, rank and find against a plain set after random changes, for
// capacities that do and do not fill the last word.
func TestSlotIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, slots := range []int{1, 63, 64, 200, 4096, 65536} {
		x := newSlotIndex(slots)
		set := make([]bool, slots)
		for round := range 20 {
			for range 1 + rng.IntN(slots) {
				s := uint16(rng.IntN(slots))
				if rng.IntN(3) == 0 {
					x.unset(s)
					set[s] = false
				} else {
					x.set(s)
					set[s] = true
				}
			}
			if round == 10 {
				x.clear()
				clear(set)
			}
			x.recount()
			below := 0
			for s := range slots {
				r, ok := x.find(uint16(s))
				if ok != set[s] || x.has(uint16(s)) != set[s] || r != below || x.rank(uint16(s)) != below {
					t.Fatalf("%d slots, slot %d: find %d %v, rank %d, has %v; want %d %v", slots, s, r, ok, x.rank(uint16(s)), x.has(uint16(s)), below, set[s])
				}
				if set[s] {
					below++
				}
			}
		}
	}
}
