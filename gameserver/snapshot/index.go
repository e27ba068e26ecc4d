package snapshot

import "math/bits"

// slotIndex maps the slots a session tracks to their positions in its slot-sorted replica array:
// a bitmap of tracked slots and, per byte of it, the number of tracked slots before that byte. A
// lookup reads two small arrays (about a kilobyte for thousands of slots), which stay in cache
// where a per-slot table would not, and counts the tracked slots below the slot within its byte
// by table: no variable shifts, and no POPCNT instruction, which math/bits checks for at run time
// with a fallback call that makes the compiler keep a hot loop's values in memory.
type slotIndex struct {
	bits   []uint8
	prefix []uint16 // per byte of bits; fewer than maxReplicas+1 slots are tracked
}

// lowBits[i] has the bits below bit i of a byte set.
var lowBits = [8]uint8{0, 1, 3, 7, 15, 31, 63, 127}

func newSlotIndex(slots int) slotIndex {
	n := (slots + 7) / 8
	return slotIndex{bits: make([]uint8, n), prefix: make([]uint16, n)}
}

func (x *slotIndex) has(slot uint16) bool { return x.bits[slot>>3]&(lowBits[slot&7]+1) != 0 }

// rank is the position of slot in the sorted replica array: the number of tracked slots below it.
func (x *slotIndex) rank(slot uint16) int {
	r, _ := x.find(slot)
	return r
}

// find is has and rank in one lookup.
func (x *slotIndex) find(slot uint16) (int, bool) {
	b, low := x.bits[slot>>3], lowBits[slot&7]
	return int(x.prefix[slot>>3]) + bits.OnesCount8(b&low), b&(low+1) != 0
}

func (x *slotIndex) set(slot uint16)   { x.bits[slot>>3] |= lowBits[slot&7] + 1 }
func (x *slotIndex) unset(slot uint16) { x.bits[slot>>3] &^= lowBits[slot&7] + 1 }

// recount refreshes the prefix counts after set or unset.
func (x *slotIndex) recount() {
	var n uint16
	for i, b := range x.bits {
		x.prefix[i] = n
		n += uint16(bits.OnesCount8(b))
	}
}

func (x *slotIndex) clear() {
	clear(x.bits)
	clear(x.prefix)
}

func (x *slotIndex) bytes() int { return cap(x.bits) + cap(x.prefix)*2 }
