package snapshot

// slotIndex maps the slots a view tracks to their replicas: a bitmap of tracked slots, which
// the store's interest query reads to skip them, and each tracked slot's position in the replica
// array. A replica keeps its position while its slot is tracked, so the records of sent packets
// name positions and an acknowledgement needs no lookup; the positions serve game-logic bumps
// and requests for full state.
type slotIndex struct {
	bits []uint8
	pos  []uint16 // valid where bits has the slot
}

func newSlotIndex(slots int) slotIndex {
	return slotIndex{bits: make([]uint8, (slots+7)/8), pos: make([]uint16, slots)}
}

func (x *slotIndex) has(slot uint16) bool { return x.bits[slot>>3]&(1<<(slot&7)) != 0 }

// find returns the position of slot's replica and whether slot is tracked.
func (x *slotIndex) find(slot uint16) (int, bool) { return int(x.pos[slot]), x.has(slot) }

func (x *slotIndex) set(slot uint16, pos int) {
	x.bits[slot>>3] |= 1 << (slot & 7)
	x.pos[slot] = uint16(pos)
}

func (x *slotIndex) unset(slot uint16) { x.bits[slot>>3] &^= 1 << (slot & 7) }

func (x *slotIndex) clear() { clear(x.bits) }

func (x *slotIndex) bytes() int { return cap(x.bits) + cap(x.pos)*2 }
