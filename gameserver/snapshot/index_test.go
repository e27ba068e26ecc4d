package snapshot

import (
	"math/rand/v2"
	"testing"
)

// TestSlotIndex checks has and find against a plain map after random changes, for capacities
// that do and do not fill the last byte.
func TestSlotIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, slots := range []int{1, 63, 64, 200, 4096, 65536} {
		x := newSlotIndex(slots)
		want := map[uint16]int{}
		for round := range 20 {
			for range 1 + rng.IntN(slots) {
				s := uint16(rng.IntN(slots))
				if rng.IntN(3) == 0 {
					x.unset(s)
					delete(want, s)
				} else {
					p := rng.IntN(maxReplicas)
					x.set(s, p)
					want[s] = p
				}
			}
			if round == 10 {
				x.clear()
				clear(want)
			}
			for s := range slots {
				p, ok := x.find(uint16(s))
				wp, wok := want[uint16(s)]
				if ok != wok || x.has(uint16(s)) != wok || ok && p != wp {
					t.Fatalf("%d slots, slot %d: find %d %v, has %v; want %d %v", slots, s, p, ok, x.has(uint16(s)), wp, wok)
				}
			}
		}
	}
}
