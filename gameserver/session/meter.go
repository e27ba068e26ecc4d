package session

// meterTicks is the longest window sendMeter can hold: one second at the highest tick rate.
const meterTicks = 128

// sendMeter counts the ticks on which a snapshot was sent over the last second: a ring of one bit
// per tick, so reading and updating it costs a few word operations and no allocation.
type sendMeter struct {
	bits   [meterTicks / 64]uint64
	window uint64 // ticks in one second, at most meterTicks
	last   uint64 // last tick recorded; bits of ticks after it are stale
}

func (m *sendMeter) reset(tickRateHz int) {
	*m = sendMeter{window: uint64(min(max(tickRateHz, 1), meterTicks))}
}

// advance clears the bits of the ticks between the last recorded tick and tick.
func (m *sendMeter) advance(tick uint64) {
	if tick <= m.last {
		return
	}
	if tick-m.last >= meterTicks {
		m.bits = [meterTicks / 64]uint64{}
	} else {
		for t := m.last + 1; t <= tick; t++ {
			i := t % meterTicks
			m.bits[i/64] &^= 1 << (i % 64)
		}
	}
	m.last = tick
}

// mark records a send on tick.
func (m *sendMeter) mark(tick uint64) {
	m.advance(tick)
	i := tick % meterTicks
	m.bits[i/64] |= 1 << (i % 64)
}

// count is the number of sends in the window of ticks ending at tick.
func (m *sendMeter) count(tick uint64) int {
	m.advance(tick)
	n := 0
	for k := uint64(0); k < m.window && k <= tick; k++ {
		i := (tick - k) % meterTicks
		if m.bits[i/64]&(1<<(i%64)) != 0 {
			n++
		}
	}
	return n
}
