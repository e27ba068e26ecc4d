package snapshot

import "math/bits"

// slotIndex maps the slots a session tracks to their positions in its slot-sorted replica array:
// a bitmap of tracked slots and, per 64-bit word, the number of tracked slots before it. A lookup
// reads two small arrays (a few hundred bytes for thousands of slots), which stay in cache where
// a per-slot table would not.
type slotIndex struct {
	bits   []uint64
	prefix []uint32
}

func newSlotIndex(slots int) slotIndex {
	words := (slots + 63) / 64
	return slotIndex{bits: make([]uint64, words), prefix: make([]uint32, words)}
}

func (x *slotIndex) has(slot uint16) bool { return x.bits[slot>>6]&(1<<(slot&63)) != 0 }

// rank is the position of slot in the sorted replica array: the number of tracked slots below it.
func (x *slotIndex) rank(slot uint16) int {
	w := slot >> 6
	return int(x.prefix[w]) + bits.OnesCount64(x.bits[w]&(1<<(slot&63)-1))
}

func (x *slotIndex) set(slot uint16)   { x.bits[slot>>6] |= 1 << (slot & 63) }
func (x *slotIndex) unset(slot uint16) { x.bits[slot>>6] &^= 1 << (slot & 63) }

// recount refreshes the prefix counts after set or unset.
func (x *slotIndex) recount() {
	var n uint32
	for i, w := range x.bits {
		x.prefix[i] = n
		n += uint32(bits.OnesCount64(w))
	}
}

func (x *slotIndex) clear() {
	clear(x.bits)
	clear(x.prefix)
}

func (x *slotIndex) bytes() int { return cap(x.bits)*8 + cap(x.prefix)*4 }
