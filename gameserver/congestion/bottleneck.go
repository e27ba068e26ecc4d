package congestion

import "math"

// phase is where the bottleneck response stands (see the package doc).
type phase uint8

const (
	phaseNone      phase = iota // no bottleneck known: the throttle alone paces the peer
	phaseDrain                  // DrainGain: the queue that revealed the bottleneck drains
	phaseCruise                 // CruiseGain
	phaseProbeUp                // ProbeGain
	phaseProbeDown              // 2-ProbeGain: what the probe queued drains
)

// bottleneck is a controller's bottleneck response: the rate of the path's bottleneck, once a
// queue building on the path revealed it, and the phase of the ceiling derived from it.
type bottleneck struct {
	rate       float64 // bytes per second; 0 when none is known
	demand     float64 // bytes per second the peer was sent recently without a ceiling (sendRate)
	phase      phase
	evals      uint32 // evaluations the phase has lasted
	drainEvals uint32 // the longest the drain lasts
	probeEvals uint32 // how long each half of a probe lasts

	// marks are the delivery count at the last two evaluations, older first, and now the
	// latest; bound reports that a frame of the interval was cut by the ceiling.
	marks [2]Delivery
	now   Delivery
	bound bool
	// pacedBefore reports that the previous interval's delivery was link paced.
	pacedBefore bool

	probe probe
}

// probe follows one probe. Its packets are those sent from fromMs until toMs (known once it
// ended); first is the delivery count when the first of them was delivered and last the latest
// before a packet sent after the probe was, once marked; bound reports that its ceiling cut a
// frame; every is the send interval it started with.
type probe struct {
	fromMs, toMs         uint32
	ended, marked, bound bool
	first, last          Delivery
	every                uint32
}

func (b *bottleneck) enter(ph phase) { b.phase, b.evals = ph, 0 }

// release forgets the bottleneck: the peer is paced by the throttle alone again.
func (b *bottleneck) release() {
	b.rate, b.demand, b.drainEvals, b.probe = 0, 0, 0, probe{}
	b.enter(phaseNone)
}

// deliveryRate is the rate a path delivered at between two delivery counts, in bytes per
// second: the bytes delivered over the longer of the span they were delivered over and the span
// they were sent over, so it exceeds neither rate. paced reports that the delivery span was the
// longer by more than linkPacedRatio: the path delivered slower than it was sent to, a queue
// built up at its bottleneck, and the rate is the bottleneck's. ok is false without a span of at
// least minDeliverySpanMs (too short to rise above the jitter of ACK and tick timing) or with
// counts out of order.
//
// Sending less makes the rate lower, never higher, and never paced: both spans stretch alike.
func deliveryRate(from, to Delivery) (rate float64, paced, ok bool) {
	ackSpan, sendSpan := int32(to.AtMs-from.AtMs), int32(to.SentMs-from.SentMs)
	if to.Bytes <= from.Bytes || ackSpan < minDeliverySpanMs || sendSpan < 0 {
		return 0, false, false
	}
	rate = float64(to.Bytes-from.Bytes) * 1000 / float64(max(ackSpan, sendSpan))
	return min(rate, maxRate), float64(ackSpan) > float64(sendSpan)*linkPacedRatio, true
}

// sendRate is the rate the bytes delivered between two delivery counts were sent at, in bytes
// per second: the bytes over the span they were sent in. ok is false with a span shorter than
// minSpanMs (at least 1) or counts out of order.
func sendRate(from, to Delivery, minSpanMs int32) (rate float64, ok bool) {
	sendSpan := int32(to.SentMs - from.SentMs)
	if to.Bytes <= from.Bytes || sendSpan < max(minSpanMs, 1) {
		return 0, false
	}
	return min(float64(to.Bytes-from.Bytes)*1000/float64(sendSpan), maxRate), true
}

// trackDelivery takes a tick's delivery count and ceiling cut, and follows a probe's packets.
func (c *Controller) trackDelivery(s Sample) {
	b := &c.b
	b.now = s.Delivered
	b.bound = b.bound || s.CeilingBound
	if b.phase != phaseProbeUp && b.phase != phaseProbeDown {
		return
	}
	p, d := &b.probe, b.now
	switch {
	case d.Bytes == 0 || int32(d.SentMs-p.fromMs) < 0:
		// Nothing of the probe delivered yet.
	case p.ended && int32(d.SentMs-p.toMs) >= 0:
		// Past the probe's packets.
	case !p.marked:
		p.first, p.last, p.marked = d, d, true
	default:
		p.last = d
	}
}

// queueBuilding is called when the ACKs show a queue building on the path, the latest of them
// ackMs long: mid-interval (early) from a run of rising round trips, or at an evaluation from two
// intervals over the margin. If the path also delivered slower than it was sent to, since the
// last evaluation (or the one before if that leaves too short a span; always so at an
// evaluation), the path is the bottleneck and its delivery rate the bottleneck's rate: the
// ceiling drops to DrainGain of it. So it does, at an evaluation, when the queue grows at the
// cruise and the path delivered less than the bottleneck rate: the ceiling is too high. A
// drain in progress is left alone: the queue it sees is the one it drains.
func (c *Controller) queueBuilding(ackMs uint32, early bool) {
	b := &c.b
	if b.phase == phaseDrain {
		return
	}
	from := b.marks[1]
	if early && int32(b.now.AtMs-from.AtMs) < minDeliverySpanMs {
		from = b.marks[0]
	}
	rate, paced, ok := deliveryRate(from, b.now)
	switch {
	case !ok:
		return
	case paced:
	case !early && b.phase == phaseCruise && rate < b.rate:
		// Every ACK of two intervals over the margin, later in the second, at the cruise: the
		// queue grows under the ceiling, so the bottleneck rate is over what the path carries
		// by less than linkPacedRatio shows (measured over the few packets of a thin peer's
		// interval, it may be). The path delivered the queue's bytes at what it carries, and
		// the rate drops to that.
	default:
		return
	}
	if b.phase == phaseNone {
		// The demand is what the peer was sent before any ceiling. A ceiling found again later
		// keeps it: the peer is sent the ceiling then.
		// The span is the delivery rate's, long enough; the bytes were sent over less of it.
		if r, ok := sendRate(from, b.now, 1); ok {
			b.demand = max(b.demand, r)
		}
	}
	b.rate = rate
	b.enter(phaseDrain)
	// The drain lasts until an interval's ACKs come back within the margin, or at most twice
	// the time the queue the ACK showed takes to drain at DrainGain (it has grown since that
	// ACK's packet was sent). A queue the ACKs overstate — a path whose delay stepped up — must
	// not hold the peer at DrainGain for long.
	queueMs := float64(ackMs) - float64(c.d.ackBaseline.ms())
	evalMs := 1000 * float64(c.p.EvalIntervalTicks) / float64(c.p.TickRateHz)
	b.drainEvals = uint32(min(max(math.Ceil(2*queueMs/(1-DrainGain)/evalMs), 1), maxDrainEvals))
}

// evaluateBottleneck moves the bottleneck response at an evaluation at nowMs, given whether
// every ACK of the interval came back over the delay margin.
func (c *Controller) evaluateBottleneck(queued bool, nowMs uint32) {
	b := &c.b
	bound := b.bound
	b.marks[0], b.marks[1], b.bound = b.marks[1], b.now, false
	if b.phase == phaseNone {
		// The recent demand: the highest rate the peer was sent at over an interval, falling
		// by demandDecay each evaluation, so that a back-off of the throttle just before a
		// queue reveals the bottleneck does not read as a smaller demand.
		b.demand *= demandDecay
		if r, ok := sendRate(b.marks[0], b.marks[1], minDeliverySpanMs); ok {
			b.demand = max(b.demand, r)
		}
		return
	}
	b.evals++
	switch b.phase {
	case phaseDrain:
		if !queued || b.evals >= b.drainEvals {
			b.enter(phaseCruise)
		}
	case phaseCruise:
		switch {
		case !queued && !bound && c.demandIntervalTicks() == 1:
			// The peer wanted no more than the ceiling gave: it needs none. (Sent every other
			// tick for its demand, it wants about the ceiling's frame either way: only a
			// probe, sent as often as its ceiling affords, shows whether it needs one.)
			b.release()
		case !queued && b.evals >= ProbeIntervalEvals:
			c.startProbe(nowMs)
		}
	case phaseProbeUp:
		b.probe.bound = b.probe.bound || bound
		if b.evals >= b.probeEvals {
			b.probe.toMs, b.probe.ended = nowMs, true
			b.enter(phaseProbeDown)
		}
	case phaseProbeDown:
		if b.evals >= b.probeEvals {
			c.judgeProbe(nowMs)
		}
	}
}

// startProbe starts a probe at nowMs: ProbeGain for long enough to send probeFrames frames at
// the probe's send interval, in whole evaluations, then 2-ProbeGain as long.
func (c *Controller) startProbe(nowMs uint32) {
	b := &c.b
	b.enter(phaseProbeUp)
	b.probe = probe{fromMs: nowMs, every: c.SendIntervalTicks()}
	ticks := probeFrames * b.probe.every
	b.probeEvals = max((ticks+c.p.EvalIntervalTicks-1)/c.p.EvalIntervalTicks, 1)
}

// judgeProbe judges a probe at nowMs, once its packets had as long again to be acknowledged,
// by the rate the path delivered them at: it raises the bottleneck rate, lowers it, or finds
// the ceiling no longer needed. A probe the peer did not fill says nothing of a path that paced
// it (the peer sent less than the path may carry), and a probe too short to measure nothing at
// all; the peer cruises on.
//
// A probe the peer did not fill shows what it wants per frame at the probe's send interval,
// and a frame that waited several ticks wants about what one that waited a tick does (it
// carries the latest state). So sent every tick the peer would want about the rate delivered
// times the interval. When that is more than the probe allowed and the path delivered more
// than the bottleneck rate, the ceiling stays: the path carries at least what it delivered,
// and a probe from there, at once, asks it for more (on a thin path, every tick). Otherwise
// the ceiling is released.
func (c *Controller) judgeProbe(nowMs uint32) {
	b := &c.b
	rate, paced, ok := deliveryRate(b.probe.first, b.probe.last)
	switch {
	case !ok || !b.probe.marked:
		// Too little of the probe was delivered to judge it.
	case paced && b.probe.bound:
		// The path delivered the probe slower than it was sent: it carries what it delivered.
		b.rate = rate
	case !paced && b.probe.bound && rate > b.rate*probeGrowth:
		// The path kept pace with the probe: it has room for at least what it delivered, at the
		// cruise. Probe again at once.
		b.rate = rate / CruiseGain
		c.startProbe(nowMs)
		return
	case !paced && !b.probe.bound && b.probe.every > 1 && rate > b.rate && rate*float64(b.probe.every) > b.rate*ProbeGain:
		// Sent less often than every tick, the peer would want more every tick than the
		// probe allowed; the path carries at least what it delivered.
		b.rate = rate
		c.startProbe(nowMs)
		return
	case !paced && !b.probe.bound:
		// The path kept pace with all the peer wanted to send: it needs no ceiling.
		b.release()
		return
	}
	b.enter(phaseCruise)
}

// pacedInterval reports whether the path delivered slower than it was sent to (deliveryRate)
// since the last evaluation.
func (c *Controller) pacedInterval() bool {
	_, paced, ok := deliveryRate(c.b.marks[1], c.b.now)
	return ok && paced
}

// deliveredRate is the rate the path delivered the peer's bytes at over the last evaluation
// interval (the bytes delivered over the span they were sent in, at least minDeliverySpanMs);
// 0 if too little was delivered to tell. Called once the marks are rolled at an evaluation.
func (c *Controller) deliveredRate() float64 {
	r, _ := sendRate(c.b.marks[0], c.b.marks[1], minDeliverySpanMs)
	return r
}

// ByteRateCeiling is the ceiling on the peer's byte rate, in bytes per second: the lower of the
// bottleneck ceiling — the bottleneck rate times the phase's gain (DrainGain, CruiseGain,
// ProbeGain, then 2-ProbeGain) — and a loss test's, but never under one MinFrameBytes frame
// every MaxIntervalTicks; 0 when the peer has neither.
func (c *Controller) ByteRateCeiling() float64 {
	if !c.p.Enabled {
		return 0
	}
	r := c.bottleneckCeiling()
	if c.l.testing() && (r == 0 || c.l.ceiling < r) {
		r = c.l.ceiling
	}
	if r <= 0 {
		return 0
	}
	least := float64(c.p.MinFrameBytes) * float64(c.p.TickRateHz) / float64(c.p.MaxIntervalTicks)
	return max(r, least)
}

// bottleneckCeiling is the bottleneck rate times the phase's gain; 0 without a bottleneck.
func (c *Controller) bottleneckCeiling() float64 {
	var gain float64
	switch c.b.phase {
	case phaseNone:
		return 0
	case phaseDrain:
		gain = DrainGain
	case phaseCruise:
		gain = CruiseGain
	case phaseProbeUp:
		gain = ProbeGain
	case phaseProbeDown:
		gain = 2 - ProbeGain
	}
	return c.b.rate * gain
}

// ceilingIntervalTicks is the send interval under the bottleneck ceiling r (ByteRateCeiling), in
// [1, MaxIntervalTicks]; 1 without a ceiling. It is at least the ticks a MinFrameBytes frame
// takes at the ceiling, and outside a probe at least demandIntervalTicks.
func (c *Controller) ceilingIntervalTicks(r float64) uint32 {
	if r <= 0 {
		return 1
	}
	// At the lowest ceiling the quotient is MaxIntervalTicks give or take a rounding error.
	n := math.Ceil(float64(c.p.MinFrameBytes)*float64(c.p.TickRateHz)/r - intervalEpsilon)
	if c.b.phase != phaseProbeUp {
		n = max(n, float64(c.demandIntervalTicks()))
	}
	return uint32(min(max(n, 1), float64(c.p.MaxIntervalTicks)))
}

// demandIntervalTicks is the send interval a peer's demand asks for under the ceiling: 2 when a
// frame of the size it had before the ceiling (its demand over the tick rate) takes one and a
// half ticks or more to cross the bottleneck, else 1. Every other tick, such a frame is about
// the ceiling's bytes over the interval; never longer, so that a frame crosses the bottleneck
// within about two tick periods.
func (c *Controller) demandIntervalTicks() uint32 {
	if c.b.rate <= 0 || c.b.demand < demandIntervalRatio*c.b.rate {
		return 1
	}
	return 2
}

// FrameCeilingBytes is the most bytes a frame may take under the bottleneck ceiling: the
// ceiling's whole bytes over ceilingIntervalTicks (so at least MinFrameBytes, and no more than
// the ceiling affords a frame at any longer interval); 0 when the peer has none. A frame is held
// this small even when the throttle sends less often: a frame crosses the bottleneck at its
// rate, and a larger one would queue behind itself.
func (c *Controller) FrameCeilingBytes() int {
	r := c.ByteRateCeiling()
	if r <= 0 {
		return 0
	}
	n := float64(c.ceilingIntervalTicks(r))
	// The epsilon keeps a product that rounding left a hair under a whole byte, such as the
	// lowest ceiling's MinFrameBytes, on that byte.
	return int(min(math.Floor(r*n/float64(c.p.TickRateHz)+intervalEpsilon), math.MaxInt32))
}
