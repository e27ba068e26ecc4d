package session

// sentRingSize is how many sent frames the lag check remembers: over a second at 60 Hz.
const sentRingSize = 64

// sentLog remembers when the session's recent frames went out, for the acknowledgement-based lag
// check.
//
// A frame handed to the transport is no proof that the client has it. The client reports the
// newest tick it applied (PING, 4 Hz, and every ACK); the session is lagging when a frame it sent
// long enough ago to have been applied — more than RTT + backpressure.lagSkipRttAllowanceMs ago —
// is newer than that tick. The reference is a frame the session sent, not the current tick, so a
// session that is sent less (rate lever, rate class, skips) never reads as lagging for that
// reason, and once the client catches up with what it was sent the lag clears.
type sentLog struct {
	ticks   [sentRingSize]uint64
	ms      [sentRingSize]int64
	n       int    // frames recorded, at most sentRingSize
	head    int    // next write
	evicted uint64 // tick of the newest frame that fell out of the ring; 0: none
}

func (l *sentLog) reset() { *l = sentLog{} }

// record notes that the frame of tick went out at ms.
func (l *sentLog) record(tick uint64, ms int64) {
	if l.n == sentRingSize {
		l.evicted = l.ticks[l.head]
	} else {
		l.n++
	}
	l.ticks[l.head], l.ms[l.head] = tick, ms
	l.head = (l.head + 1) % sentRingSize
}

// dueBy returns the tick of the newest frame sent at or before ms, and whether there is one.
func (l *sentLog) dueBy(ms int64) (uint64, bool) {
	for k := 1; k <= l.n; k++ {
		i := (l.head - k + sentRingSize) % sentRingSize
		if l.ms[i] <= ms {
			return l.ticks[i], true
		}
	}
	return l.evicted, l.evicted != 0
}
