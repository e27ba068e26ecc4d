package congestion

import (
	"math"
	"math/bits"
)

// Loss estimator constants.
const (
	// LossRingSize is how many sent, not yet judged packets a LossEstimator tracks: more than a
	// second of 16 packets per tick at 60 Hz. When it is full the oldest packet is forgotten
	// unjudged, never counted lost, so sending more can never read as more loss.
	LossRingSize = 1024

	// MinJudgeMarginMs is the least time, beyond the RTT, that a packet's ACK is waited for before
	// the packet is judged. The margin is max(MinJudgeMarginMs, RTT/2): it absorbs RTT jitter and
	// the client's processing, so a late ACK is rare and not mistaken for loss.
	MinJudgeMarginMs = 50

	// LossTimeConstantMs is the time constant of the loss average. Judged packets are weighted by
	// exp(-age/LossTimeConstantMs) in wall-clock time, not per packet, so the estimate reacts
	// equally fast at 60 and at 10 packets per second: after a jump to loss p it averages
	// p(1 - exp(-t/500 ms)), so a jump to 10% loss crosses the default 2% threshold within about
	// 110 ms of judged packets. Fewer packets make it noisier, not slower or biased.
	LossTimeConstantMs = 500

	// AckStallMs is how much longer than the horizon a packet waits to be judged when no packet
	// sent after it has been acknowledged: the ACKs may all be late rather than lost (a path
	// whose delay jumped by more than the judging margin), and judged before the first of them
	// arrives, they would read as a burst of loss. Once a later packet's ACK arrives, its round
	// trip widens the horizon.
	AckStallMs = 1000

	// forgetWeight is the decayed packet weight below which the evidence has expired (about 3.5 s
	// without a judgment at the default time constant): the estimate returns to 0, "no signal".
	forgetWeight = 1e-3

	lossRingMask = LossRingSize - 1
)

// slot states of the loss ring.
const (
	slotSkipped uint8 = iota // a sequence number the sender never used: judged as nothing
	slotSent
	slotAcked
)

type lossSlot struct {
	// sentMs is the send time truncated to 32 bits; ages are taken as int32 differences, exact for
	// ages up to 24 days.
	sentMs uint32
	size   uint16
	state  uint8
}

// LossEstimator measures a session's application-level snapshot loss. The server numbers every
// snapshot packet it sends to the session with a uint16 sequence (consecutive, wrapping), and the
// client acknowledges received packets: each ACK carries the latest received sequence and a
// bitfield of the ones before it. The client is expected to acknowledge on receipt; any delay it
// adds before acknowledging must fit within the judging margin below.
//
// A packet is judged once the packet sent after it is older than RTT + max(MinJudgeMarginMs,
// RTT/2) and a packet sent after it has been acknowledged: by then the ACK of that next packet,
// whose bitfield repeats this one, has had time to arrive, so one lost ACK is not loss, at any
// send rate; and ACKs that are merely late, all of them, are not loss either. Without any later
// ACK a packet waits AckStallMs more. Judgment waits on wall-clock age and on ACKs, never on a
// count of packets or ticks, so a slower cadence delays it but cannot fake loss. (Under
// heavy random ACK loss q a received packet is still misread as lost with probability about q
// squared at the lowest rates, where only that one extra ACK falls within the margin: a
// reverse path losing 10% of ACKs reads as 1% forward loss, under the default 2% threshold.)
//
// Judged packets feed a time-decayed loss ratio (LossTimeConstantMs). ACKs for packets already
// judged, never sent, or forgotten are ignored, and duplicates are harmless; the newest packet
// waits for a successor, so when sending stops the estimate simply holds and then fades to 0.
//
// It is a value type (about 8 KiB) meant to live inside a session struct; the zero value is ready.
type LossEstimator struct {
	ring  [LossRingSize]lossSlot
	head  uint16 // the sequence the next OnSent is expected to carry
	count int    // tracked packets: sequences head-count .. head-1

	lostW, totalW float64 // time-decayed judged packet counts
	lastUpdateMs  int64
	updated       bool

	// ackRTTMs is the smallest round trip sampled since the last TakeAckRTT; haveAckRTT says
	// there is one. lastAckRTTMs is the latest sample, which widens the judging horizon.
	ackRTTMs     uint32
	haveAckRTT   bool
	lastAckRTTMs uint32

	// del is the delivery count (Delivered), its judgments included.
	del Delivery
	// top is the newest sequence acknowledged since tracking (re)started, if haveTop.
	top     uint16
	haveTop bool
	// lastLost reports that the packet judged last was lost.
	lastLost bool
}

// Delivery is a session's delivery count: the bytes of its snapshot packets acknowledged so
// far, when that count last grew, and when the newest packet it counts was sent (milliseconds
// truncated to 32 bits, like the estimator's send times). Two counts taken apart give the rate
// the path delivered at between them (Controller, via Sample).
//
// It also counts the estimator's judgments: the packets judged so far (never-sent sequence
// numbers and forgotten packets are not judged), how many of them were judged lost, in how many
// runs (lost packets judged one after the other count as one run), and when the newest judged
// packet was sent. Two counts taken apart give the loss among the packets judged between them,
// and JudgedSentMs tells which were sent after a given moment.
type Delivery struct {
	Bytes  uint64
	AtMs   uint32
	SentMs uint32

	Judged, Lost, LossRuns uint64
	JudgedSentMs           uint32
}

// Reset forgets every tracked packet and the loss history.
func (e *LossEstimator) Reset() {
	*e = LossEstimator{}
}

// OnSent records that the packet numbered seq, of size bytes, was sent at nowMs. Sequences are
// expected to be consecutive; a jump ahead (fewer than LossRingSize) marks the skipped numbers as
// never sent, and any other sequence restarts tracking at seq without judging what was tracked.
// The size only feeds the delivery count (Delivered); sizes beyond 65535 count as 65535.
func (e *LossEstimator) OnSent(seq uint16, size int, nowMs int64) {
	now := uint32(nowMs)
	if gap := int(seq - e.head); e.count > 0 && gap < LossRingSize {
		for range gap {
			e.push(e.head, lossSlot{sentMs: now, state: slotSkipped})
		}
	} else {
		e.count, e.head, e.haveTop = 0, seq, false
	}
	e.push(seq, lossSlot{sentMs: now, state: slotSent, size: uint16(min(max(size, 0), math.MaxUint16))})
}

// push appends slot as seq at head; a full ring forgets its oldest packet unjudged.
func (e *LossEstimator) push(seq uint16, slot lossSlot) {
	e.ring[seq&lossRingMask] = slot
	e.head = seq + 1
	e.count = min(e.count+1, LossRingSize)
}

// sent returns packet seq's slot if it is tracked and not acknowledged yet.
func (e *LossEstimator) sent(seq uint16) (*lossSlot, bool) {
	back := int(e.head - 1 - seq) // 0 for the newest tracked packet; wraps for unknown ones
	if back >= e.count {
		return nil, false
	}
	s := &e.ring[seq&lossRingMask]
	return s, s.state == slotSent
}

// OnAck records the client's acknowledgement of packet seq.
func (e *LossEstimator) OnAck(seq uint16) {
	if s, ok := e.sent(seq); ok {
		e.acked(seq, s)
	}
}

// acked marks tracked packet seq, slot s, acknowledged.
func (e *LossEstimator) acked(seq uint16, s *lossSlot) {
	s.state = slotAcked
	if !e.haveTop || int16(seq-e.top) > 0 {
		e.top, e.haveTop = seq, true
	}
}

// OnAckField records an ACK that carries the latest received sequence and a bitfield of the
// packets before it: bit i set acknowledges latest-1-i. A 32-bit field is passed widened.
func (e *LossEstimator) OnAckField(latest uint16, preceding uint64) {
	e.OnAck(latest)
	for ; preceding != 0; preceding &= preceding - 1 {
		e.OnAck(latest - 1 - uint16(bits.TrailingZeros64(preceding)))
	}
}

// OnAckFieldAt is OnAckField for an ACK that arrived at nowMs. The first ACK of the latest
// packet also samples that packet's round trip, from its send to nowMs, for TakeAckRTT; and the
// bytes of the packets it acknowledges first are counted delivered at nowMs (Delivered).
func (e *LossEstimator) OnAckFieldAt(latest uint16, preceding uint64, nowMs int64) {
	now := uint32(nowMs)
	if s, ok := e.sent(latest); ok {
		if rtt := int32(now - s.sentMs); rtt >= 0 {
			e.lastAckRTTMs = uint32(rtt)
			if !e.haveAckRTT || uint32(rtt) < e.ackRTTMs {
				e.ackRTTMs, e.haveAckRTT = uint32(rtt), true
			}
		}
	}
	grew := e.deliver(latest, now)
	for ; preceding != 0; preceding &= preceding - 1 {
		grew = e.deliver(latest-1-uint16(bits.TrailingZeros64(preceding)), now) || grew
	}
	if grew {
		e.del.AtMs = now
	}
}

// deliver acknowledges seq and, if this is its first ACK, counts its bytes delivered and
// reports true.
func (e *LossEstimator) deliver(seq uint16, now uint32) bool {
	s, ok := e.sent(seq)
	if !ok {
		return false
	}
	e.acked(seq, s)
	if e.del.Bytes == 0 || int32(s.sentMs-e.del.SentMs) > 0 {
		e.del.SentMs = s.sentMs // the newest delivered; an ACK that fills in older ones keeps it
	}
	e.del.Bytes += uint64(s.size)
	return true
}

// Delivered returns the delivery count, which OnAckFieldAt keeps (OnAck and OnAckField, which
// know no arrival time, count no bytes), and the judgments, which Update makes. Bytes only grow
// with first ACKs: sending less makes them grow more slowly, never faster; and a packet is
// judged by wall-clock age, so sending less delays judgments but never adds to the lost.
func (e *LossEstimator) Delivered() Delivery { return e.del }

// TakeAckRTT returns the smallest round trip sampled by OnAckFieldAt since the last call, in
// milliseconds, and starts a new sampling period; ok is false when no packet was sampled.
//
// It is the fast delay signal: every acknowledged snapshot measures the path as it is now,
// queue included, where ENet's RTT is smoothed over pings a quarter of a second apart. Taking the
// smallest sample filters out the client's acknowledgement delay and the server's own tick
// jitter. Sending less yields fewer samples, not larger ones, so the controller's own decimation
// cannot make the link look slower (beyond the jitter the minimum of fewer samples keeps, far
// under any useful delay margin).
func (e *LossEstimator) TakeAckRTT() (ms uint32, ok bool) {
	ms, ok = e.ackRTTMs, e.haveAckRTT
	e.ackRTTMs, e.haveAckRTT = 0, false
	return ms, ok
}

// Update judges every packet that is due at nowMs given the current RTT, folds the judgments
// into the loss average and returns the loss ratio in [0, 1]. The RTT it judges by is the larger
// of rttMs (ENet's, smoothed) and the latest acknowledgement round trip: a queue building on the
// path delays ACKs at once, and a late ACK must not be read as loss before ENet's RTT catches up.
func (e *LossEstimator) Update(nowMs int64, rttMs uint32) float64 {
	rttMs = max(rttMs, e.lastAckRTTMs)
	if !e.updated || nowMs > e.lastUpdateMs {
		if e.updated {
			// The difference is taken in float64: int64 subtraction could overflow.
			decay := math.Exp(-(float64(nowMs) - float64(e.lastUpdateMs)) / LossTimeConstantMs)
			e.lostW *= decay
			e.totalW *= decay
		}
		e.lastUpdateMs, e.updated = nowMs, true
	}

	horizon := int64(rttMs) + max(MinJudgeMarginMs, int64(rttMs/2))
	now := uint32(nowMs)
	for e.count >= 2 {
		tail := e.head - uint16(e.count)
		next := e.ring[(tail+1)&lossRingMask]
		age := int64(int32(now - next.sentMs))
		laterAcked := e.haveTop && int16(e.top-tail) > 0
		if age <= horizon || !laterAcked && age <= horizon+AckStallMs {
			break // sends are in time order: nothing later is due either
		}
		switch s := &e.ring[tail&lossRingMask]; s.state {
		case slotSent:
			e.lostW++
			e.totalW++
			e.del.Lost++
			if !e.lastLost {
				e.del.LossRuns++
			}
			e.lastLost = true
			e.judge(s)
		case slotAcked:
			e.totalW++
			e.lastLost = false
			e.judge(s)
		}
		e.count--
	}

	if e.totalW < forgetWeight {
		e.lostW, e.totalW = 0, 0
	}
	return e.Loss()
}

// judge counts packet s judged.
func (e *LossEstimator) judge(s *lossSlot) {
	e.del.Judged++
	e.del.JudgedSentMs = s.sentMs
}

// Loss returns the loss ratio as of the last Update, in [0, 1]; 0 without evidence.
func (e *LossEstimator) Loss() float64 {
	if e.totalW == 0 {
		return 0
	}
	return min(e.lostW/e.totalW, 1)
}
