package congestion

import (
	"math"
)

// NeverSent is the lastSentTick of a peer that has not been sent a snapshot yet; ShouldSend
// always sends it.
const NeverSent = math.MaxUint64

// intervalEpsilon absorbs floating-point error in 1/throttle, so a throttle of exactly one third
// that is stored as 0.33333333333333337 or 0.3333333333333333 sends every 3 ticks, not 4.
const intervalEpsilon = 1e-9

// Sample is one tick's link signals for a peer. The zero Sample means "no link stats yet".
type Sample struct {
	// LossRatio is the application-level snapshot loss in [0, 1] (LossEstimator.Update).
	LossRatio float64
	// RTTMs is ENet's smoothed round-trip time; 0 means unknown and disables the delay trigger.
	RTTMs uint32
	// ReliableBytesInFlight is ENet's reliable data in transit.
	ReliableBytesInFlight uint32
	// AckRTTMs is the smallest round trip of the snapshot packets first acknowledged this tick
	// (LossEstimator.TakeAckRTT), valid when HaveAckRTT is set.
	AckRTTMs   uint32
	HaveAckRTT bool
	// Delivered is the session's delivery count and judgments (LossEstimator.Delivered), and
	// NowMs the time of the tick on the same clock, truncated to 32 bits.
	Delivered Delivery
	NowMs     uint32
	// CeilingBound reports that a frame built since the previous Step left records out because
	// of FrameCeilingBytes: the ceiling, not the peer's demand, limited what it sent.
	CeilingBound bool
}

// Controller is one peer's AIMD congestion controller. It is a value type meant to live inside a
// session struct; the zero Controller is disabled (throttle 1). Reset it with the peer's Params
// when the session starts.
type Controller struct {
	p         Params
	throttle  float64
	sinceEval uint32
	// signals are the last evaluation's congestion signals; none: the peer is not congested.
	signals Signals

	d delay
	l lossResponse
	b bottleneck
}

// Reset starts the controller afresh with p: throttle 1, no RTT baseline, a full eval interval
// before the first evaluation.
func (c *Controller) Reset(p Params) {
	*c = Controller{p: p.sanitized(), throttle: 1}
	c.l.reset(&c.p)
}

// SetParams applies new Params mid-run (live reconfig). The throttle, baselines, bottleneck
// response, loss verdict and eval phase are kept; the throttle is clamped into the new
// [floor, 1]. Disabling pins the throttle to 1 and forgets the bottleneck, the delay episode and
// the loss verdict.
func (c *Controller) SetParams(p Params) {
	t := c.Throttle()
	c.p = p.sanitized()
	c.l.setParams(&c.p)
	if !c.p.Enabled {
		c.throttle, c.signals, c.sinceEval = 1, 0, 0
		c.b.release()
		c.d.ep = episode{}
		c.l.forget()
		return
	}
	c.throttle = min(max(t, c.p.ThrottleFloor), 1)
	c.d.ep.preThrottle = min(max(c.d.ep.preThrottle, c.p.ThrottleFloor), 1)
	c.d.hold = min(c.d.hold, c.p.BaselineHoldTicks)
}

// Params returns the controller's Params as clamped into their safe ranges.
func (c *Controller) Params() Params { return c.p }

// Step advances the controller by one tick with the peer's current link signals. The RTT
// baselines, the delivery count and the judged packets are tracked every tick, and a queue that
// the ACKs show building is answered at once (bottleneck.go); every EvalIntervalTicks-th call
// classifies the peer and moves the bottleneck response, the loss response and the throttle,
// which are held in between.
func (c *Controller) Step(s Sample) {
	c.d.track(&c.p, s)
	if !c.p.Enabled {
		c.d.haveAckMin = false
		c.l.sync(s.Delivered)
		return
	}
	c.trackDelivery(s)
	c.l.track(s.Delivered)
	if c.d.ackRise >= earlyQueueSamples {
		c.queueBuilding(c.d.lastAckMs, true)
	}
	c.sinceEval++
	if c.sinceEval < c.p.EvalIntervalTicks {
		return
	}
	c.sinceEval = 0
	c.evaluate(s)
}

// evaluate classifies the peer at the end of an evaluation interval and moves the throttle.
func (c *Controller) evaluate(s Sample) {
	d := &c.d
	ackQueue, rttDelay := d.delayed(&c.p, s.RTTMs)
	intervalRise := ackQueue && d.prevAckQueue && d.ackMinMs >= d.prevAckMinMs+c.riseMs()
	if intervalRise {
		// Every ACK of this interval and of the one before was over the margin, and this
		// interval's were later: the queue grew. (A path whose delay stepped up rises once.)
		c.queueBuilding(d.ackMinMs, false)
	}
	// A sign of a queue: a path that delivered slower than it was sent to over two intervals
	// in a row. Over one it may only have got longer in between (a step up in delay stretches
	// the span its ACKs arrive over once, as a queue does all along), and round trips that
	// rise from one sample to the next may be jitter: the delay episode judges those.
	paced := c.pacedInterval()
	evidence := paced && c.b.pacedBefore
	c.b.pacedBefore = paced
	d.prevAckMinMs, d.prevAckQueue = d.ackMinMs, ackQueue
	c.evaluateBottleneck(ackQueue, s.NowMs)

	v, queued, undo, changed := d.episode(&c.p, ackQueue, rttDelay, evidence, c.throttle)
	if changed {
		// A longer path: what its onset looked like is undone, the back-off and any ceiling.
		c.throttle = min(max(c.throttle, undo), 1)
		c.b.release()
	}
	d.haveAckMin = false
	delayed := v != delayNone
	backlog := s.ReliableBytesInFlight > c.p.BacklogThresholdBytes
	lossCongested := c.l.evaluate(&c.p, c, s.LossRatio, queued || delayed || backlog, s.NowMs)

	var set Signals
	if lossCongested {
		set |= SignalLoss
	}
	if delayed {
		set |= SignalDelay
	}
	if backlog {
		set |= SignalBacklog
	}
	c.signals = set
	switch {
	case lossCongested || backlog:
		c.throttle = max(c.p.ThrottleFloor, c.throttle*c.p.DecreaseFactor)
	case v == delayPending || delayed && c.b.phase != phaseNone:
		// Delay that has not yet shown whether it is a queue: the back-off at its onset is the
		// test, and the throttle holds until the round trip answers. Delay on a path whose
		// bottleneck is known: the ceiling answers it, so the throttle holds rather than
		// cutting the send rate a second time.
	case delayed:
		c.throttle = max(c.p.ThrottleFloor, c.throttle*c.p.DecreaseFactor)
	case c.l.holds():
		// A loss test measures the loss at the rate it holds the peer to; after a loss over
		// the ceiling, the peer does not climb back into it before the loss has a verdict.
	default:
		c.throttle = min(1, c.throttle+c.p.IncreaseStep)
	}
}

// riseMs is how much longer than the one before an acknowledgement round trip must be to show
// a queue growing: an eighth of the delay margin.
func (c *Controller) riseMs() uint32 { return c.p.DelayMarginMs / 8 }

// Signals is a set of congestion signals: what made an evaluation find a peer congested.
type Signals uint8

// The congestion signals.
const (
	SignalLoss    Signals = 1 << iota // loss that comes with a queue or rises with the send rate, or loss over the ceiling
	SignalDelay                       // a round trip over its baseline plus the margin, not a longer path
	SignalBacklog                     // reliable bytes in flight over the threshold
)

// String names the signals in the set joined by "+" ("loss+delay"), or "" for none.
func (s Signals) String() string {
	var b []byte
	for _, n := range [...]struct {
		bit  Signals
		name string
	}{{SignalLoss, "loss"}, {SignalDelay, "delay"}, {SignalBacklog, "backlog"}} {
		if s&n.bit != 0 {
			if len(b) > 0 {
				b = append(b, '+')
			}
			b = append(b, n.name...)
		}
	}
	return string(b)
}

// AckBaselineRTTMs returns the acknowledgement round trip's running-minimum baseline in whole
// milliseconds, 0 before the first sample.
func (c *Controller) AckBaselineRTTMs() uint32 { return c.d.ackBaseline.ms() }

// BaselineRTTMs returns the running-minimum RTT baseline in whole milliseconds, 0 before the
// first RTT sample.
func (c *Controller) BaselineRTTMs() uint32 { return c.d.baseline.ms() }

// Throttle returns the current throttle in [ThrottleFloor, 1]; exactly 1 when disabled or healthy.
func (c *Controller) Throttle() float64 {
	if !c.p.Enabled {
		return 1
	}
	return c.throttle
}

// Congested reports whether the last evaluation found the peer congested.
func (c *Controller) Congested() bool { return c.Signals() != 0 }

// Signals returns the congestion signals of the last evaluation: why Congested is true; none
// while disabled.
func (c *Controller) Signals() Signals {
	if !c.p.Enabled {
		return 0
	}
	return c.signals
}

// SendIntervalTicks is the rate lever: the peer is sent one snapshot every this many ticks,
// clamp(ceil(1/throttle), 1, MaxIntervalTicks), and under a ceiling at least
// ceilingIntervalTicks (a frame of MinFrameBytes takes that long at the ceiling). The throttle is
// never below a positive floor and the quotient is clamped before the conversion, so no NaN or
// Inf can arise.
func (c *Controller) SendIntervalTicks() uint32 {
	n := c.ceilingIntervalTicks(c.ByteRateCeiling())
	if t := c.Throttle(); t < 1 {
		n = max(n, uint32(min(max(math.Ceil(1/t-intervalEpsilon), 1), float64(c.p.MaxIntervalTicks))))
	}
	return n
}

// ShouldSend reports whether a peer last sent at lastSentTick is due a snapshot at tick:
// tick - lastSentTick >= SendIntervalTicks. A lastSentTick ahead of tick — NeverSent included —
// means the peer has no send in this tick numbering, so it is sent now.
func (c *Controller) ShouldSend(tick, lastSentTick uint64) bool {
	if tick < lastSentTick {
		return true
	}
	return tick-lastSentTick >= uint64(c.SendIntervalTicks())
}

// EffectiveBudget is the budget lever: the per-tick byte budget for a static budget,
// max(min(static, BudgetFloorBytes), round(static*throttle)). It returns static unchanged when
// static <= 0 (0 is unlimited: only the rate lever applies) or the throttle is 1; the floor is
// capped at static, so a budget already below the floor is never raised.
func (c *Controller) EffectiveBudget(static int) int {
	t := c.Throttle()
	if static <= 0 || t >= 1 {
		return static
	}
	scaled := math.Round(float64(static) * t)
	if scaled >= float64(static) { // float64(static) may round up; this also guards the cast
		return static
	}
	return max(min(static, c.p.BudgetFloorBytes), int(scaled))
}
