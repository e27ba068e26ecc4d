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
	// Delivered is the session's delivery count (LossEstimator.Delivered), and NowMs the time
	// of the tick on the same clock, truncated to 32 bits.
	Delivered Delivery
	NowMs     uint32
	// CeilingBound reports that a frame built since the previous Step left records out because
	// of FrameCeilingBytes: the bottleneck ceiling, not the peer's demand, limited what it sent.
	CeilingBound bool
}

// Controller is one peer's AIMD congestion controller. It is a value type meant to live inside a
// session struct; the zero Controller is disabled (throttle 1). Reset it with the peer's Params
// when the session starts.
type Controller struct {
	p         Params
	throttle  float64
	sinceEval uint32
	// baseline is ENet's RTT's running minimum, ackBaseline the acknowledgement round trip's;
	// ackMinMs is the smallest acknowledgement round trip since the last evaluation.
	baseline    runningMin
	ackBaseline runningMin
	ackMinMs    uint32
	haveAckMin  bool
	// prevAckMinMs is the previous interval's smallest acknowledgement round trip and
	// prevAckQueue whether it was over the margin.
	prevAckMinMs uint32
	prevAckQueue bool
	// ackRise counts the latest acknowledgement round trips in a row (one a tick at most) over
	// the baseline plus the margin, each at least riseMs longer than the one before; lastAckMs
	// is the latest.
	ackRise   uint32
	lastAckMs uint32
	// driftHold is how many more ticks the baselines do not drift (Params.BaselineHoldTicks).
	driftHold uint32
	// signals are the last evaluation's congestion signals; none: the peer is not congested.
	signals Signals

	b bottleneck
}

// runningMin is a delay baseline in microseconds (finer than ms so that the per-tick drift of a
// fraction of a millisecond accumulates exactly): the smallest sample seen, rising by the drift
// it is given each tick. It follows any fall at once and any rise only at the drift's pace.
type runningMin struct {
	us uint64
	ok bool // a sample was seen
}

func (b *runningMin) drift(us uint32) {
	if b.ok {
		b.us += uint64(us)
	}
}

func (b *runningMin) observe(us uint64) {
	if !b.ok || us < b.us {
		b.us, b.ok = us, true
	}
}

// exceeds reports whether us lies more than margin above the baseline. The subtraction is
// guarded: a sample can be below the baseline only until it is observed.
func (b *runningMin) exceeds(us, margin uint64) bool {
	return b.ok && us > b.us && us-b.us > margin
}

func (b *runningMin) ms() uint32 { return uint32(min(b.us/1000, math.MaxUint32)) }

// Reset starts the controller afresh with p: throttle 1, no RTT baseline, a full eval interval
// before the first evaluation.
func (c *Controller) Reset(p Params) {
	*c = Controller{p: p.sanitized(), throttle: 1}
}

// SetParams applies new Params mid-run (live reconfig). The throttle, baselines, bottleneck
// response and eval phase are kept; the throttle is clamped into the new [floor, 1]. Disabling
// pins the throttle to 1 and forgets the bottleneck.
func (c *Controller) SetParams(p Params) {
	t := c.Throttle()
	c.p = p.sanitized()
	if !c.p.Enabled {
		c.throttle, c.signals, c.sinceEval = 1, 0, 0
		c.b.release()
		return
	}
	c.throttle = min(max(t, c.p.ThrottleFloor), 1)
	c.driftHold = min(c.driftHold, c.p.BaselineHoldTicks)
}

// Params returns the controller's Params as clamped into their safe ranges.
func (c *Controller) Params() Params { return c.p }

// Step advances the controller by one tick with the peer's current link signals. The RTT
// baselines and the delivery count are tracked every tick, and a queue that the ACKs show
// building is answered at once (bottleneck.go); every EvalIntervalTicks-th call classifies the
// peer and moves the bottleneck response and the throttle, which are held in between.
func (c *Controller) Step(s Sample) {
	if s.LossRatio > c.p.LossThreshold*LossEvidenceShare {
		c.driftHold = c.p.BaselineHoldTicks
	}
	drift := c.p.BaselineDriftUsPerTick
	if c.driftHold > 0 {
		drift = 0
		c.driftHold--
	}
	c.trackBaseline(s.RTTMs, drift)
	c.trackAckRTT(s, drift)
	if !c.p.Enabled {
		c.haveAckMin = false
		return
	}
	c.trackDelivery(s)
	if c.ackRise >= earlyQueueSamples {
		c.queueBuilding(c.lastAckMs, true)
	}
	c.sinceEval++
	if c.sinceEval < c.p.EvalIntervalTicks {
		return
	}
	c.sinceEval = 0
	sig := c.classify(s)
	if sig.ackQueue && c.prevAckQueue && c.ackMinMs >= c.prevAckMinMs+c.riseMs() {
		// Every ACK of this interval and of the one before was over the margin, and this
		// interval's were later: the queue grew. (A path whose delay stepped up rises once.)
		c.queueBuilding(c.ackMinMs, false)
	}
	c.prevAckMinMs, c.prevAckQueue = c.ackMinMs, sig.ackQueue
	c.haveAckMin = false
	c.evaluateBottleneck(sig.ackQueue, s.NowMs)
	set := sig.set()
	if set&SignalDelay != 0 && c.signals&SignalDelay == 0 {
		// A delay rise: the baselines wait BaselineHoldMs before following it.
		c.driftHold = max(c.driftHold, c.p.BaselineHoldTicks)
	}
	c.signals = set
	switch {
	case sig.loss || sig.backlog:
		c.throttle = max(c.p.ThrottleFloor, c.throttle*c.p.DecreaseFactor)
	case set != 0 && c.b.phase != phaseNone:
		// Delay on a path whose bottleneck is known: the ceiling answers it, so the throttle
		// holds rather than cutting the send rate a second time.
	case set != 0:
		c.throttle = max(c.p.ThrottleFloor, c.throttle*c.p.DecreaseFactor)
	default:
		c.throttle = min(1, c.throttle+c.p.IncreaseStep)
	}
}

// riseMs is how much longer than the one before an acknowledgement round trip must be to show
// a queue growing: an eighth of the delay margin.
func (c *Controller) riseMs() uint32 { return c.p.DelayMarginMs / 8 }

// trackAckRTT keeps the acknowledgement round trip's baseline — its drift (driftUs, 0 during a
// hold) accrues every tick, whether or not a packet was acknowledged —, the smallest sample of
// the evaluation interval, and the run of samples rising over the margin.
func (c *Controller) trackAckRTT(s Sample, driftUs uint32) {
	c.ackBaseline.drift(driftUs)
	if !s.HaveAckRTT {
		return
	}
	c.ackBaseline.observe(uint64(s.AckRTTMs) * 1000)
	switch {
	case !c.ackBaseline.exceeds(uint64(s.AckRTTMs)*1000, uint64(c.p.DelayMarginMs)*1000):
		c.ackRise = 0
	case c.ackRise > 0 && s.AckRTTMs >= c.lastAckMs+c.riseMs():
		c.ackRise++
	default:
		c.ackRise = 1
	}
	c.lastAckMs = s.AckRTTMs
	if !c.haveAckMin || s.AckRTTMs < c.ackMinMs {
		c.ackMinMs, c.haveAckMin = s.AckRTTMs, true
	}
}

// trackBaseline keeps the RTT baseline at min(rtt, baseline + driftUs), drifting only on ticks
// with an RTT. An RTT of 0 is "unknown" and skipped.
func (c *Controller) trackBaseline(rttMs, driftUs uint32) {
	if rttMs == 0 {
		return
	}
	c.baseline.drift(driftUs)
	c.baseline.observe(uint64(rttMs) * 1000)
}

// Signals is a set of congestion signals: what made an evaluation find a peer congested.
type Signals uint8

// The congestion signals.
const (
	SignalLoss    Signals = 1 << iota // loss over the threshold
	SignalDelay                       // ENet's RTT or the acknowledgement round trip over its baseline plus the margin
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

// signals are the congestion signals of one evaluation.
type signals struct {
	loss, backlog bool
	// ackQueue: every packet acknowledged in the interval took longer than the acknowledgement
	// baseline plus the margin, so a queue stood on the path; rttDelay: ENet's RTT is over its
	// baseline plus the margin.
	ackQueue, rttDelay bool
}

// set is the evaluation's signals as a Signals set.
func (g signals) set() Signals {
	var s Signals
	if g.loss {
		s |= SignalLoss
	}
	if g.ackQueue || g.rttDelay {
		s |= SignalDelay
	}
	if g.backlog {
		s |= SignalBacklog
	}
	return s
}

func (c *Controller) classify(s Sample) signals {
	margin := uint64(c.p.DelayMarginMs) * 1000
	return signals{
		loss:     s.LossRatio > c.p.LossThreshold, // NaN compares false: no evidence, no trigger
		backlog:  s.ReliableBytesInFlight > c.p.BacklogThresholdBytes,
		ackQueue: c.haveAckMin && c.ackBaseline.exceeds(uint64(c.ackMinMs)*1000, margin),
		rttDelay: s.RTTMs != 0 && c.baseline.exceeds(uint64(s.RTTMs)*1000, margin),
	}
}

// AckBaselineRTTMs returns the acknowledgement round trip's running-minimum baseline in whole
// milliseconds, 0 before the first sample.
func (c *Controller) AckBaselineRTTMs() uint32 { return c.ackBaseline.ms() }

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

// BaselineRTTMs returns the running-minimum RTT baseline in whole milliseconds, 0 before the
// first RTT sample.
func (c *Controller) BaselineRTTMs() uint32 { return c.baseline.ms() }

// SendIntervalTicks is the rate lever: the peer is sent one snapshot every this many ticks,
// clamp(ceil(1/throttle), 1, MaxIntervalTicks), and under a bottleneck ceiling at least
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
