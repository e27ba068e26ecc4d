package congestion

import "math"

// BaselineDriftMsPerSecond is how fast the RTT baseline may rise toward a higher RTT, in
// milliseconds per second of ticks, once BaselineHoldMs has passed. The baseline is a running
// minimum, so without drift a rise that no sign calls a queue would read as delay for ever. A
// step up that holds level is followed at once instead (PathChangeEvals); the drift follows what
// is left: a slow ramp, or a rise that only ENet's RTT shows (a re-route adding 100 ms reads as
// delay for 5 + (100 - 40) / 10 = 11 s at the default 40 ms margin).
const BaselineDriftMsPerSecond = 10

// BaselineHoldMs is how long the RTT baselines do not drift after an evaluation first finds the
// peer delayed, or after any sign of a queue: a delay found to be one (its round trip fell when
// the peer was sent less, or grew although it was), or a path delivering slower than it was
// sent to. Each restarts the hold, so the drift cannot absorb a queue the peer keeps building.
const BaselineHoldMs = 5000

// PathChangeEvals is how many evaluations after the first one that found a peer delayed its
// acknowledgement round trip must hold level (within an eighth of the delay margin of where it
// rose to), with no sign of a queue, for the rise to count as a longer path: the baselines then
// step up to it and the back-off it caused is undone. A queue drains when the peer is sent
// less, or grows if that was not enough; a longer path does neither.
const PathChangeEvals = 3

// enetCatchUpMs bounds how long ENet's smoothed RTT is given to climb to a baseline a path
// change raised (ENet moves its RTT an eighth of the way to each ping's, four times a second).
const enetCatchUpMs = 5000

// The loss response's constants (see the package doc, "The loss test").
const (
	// LossWindowMs is the time constant of the loss window: the judged packets' counts decay
	// by exp(-age/LossWindowMs), so the window holds about the last two seconds of judgments.
	// The loss ceiling is judged on it, not on the faster loss ratio, so that a few bursts of
	// losses on a link that loses in bursts do not cross it.
	LossWindowMs = 2000
	// LossRateMs is the time constant of the delivery rate a loss test holds the peer under a
	// share of: on a path that drops what exceeds a rate, the average follows that rate within a
	// second of the drops starting.
	LossRateMs = 500
	// LossRecentMs is the time constant of the faster loss window a loss test compares the
	// loss of its packets with: about the last second of judgments, so that a loss that began
	// lately is not diluted by the loss-free packets before it.
	LossRecentMs = 1000
	// LossEvidenceShare is the share of the loss threshold under which the loss window's ratio
	// means the loss has stopped: a verdict that the loss was random ends.
	LossEvidenceShare = 0.25
	// LossTestMaxMs bounds a loss test; one that has not judged enough packets by then is
	// inconclusive, and the loss is taken as random.
	LossTestMaxMs = 3000
	// LossCongestiveMs is how long a verdict that the loss depends on the send rate holds; the
	// loss is then tested again if it goes on.
	LossCongestiveMs = 5000

	// minWindowPackets is how many judged packets the loss window, or a test, needs before its
	// ratio says anything; ceilingZ is by how many standard deviations of a loss at the ceiling
	// the window's loss must be over it (a loss of 40% is, on 30 packets; one of 10%, a
	// hundred packets in, once in several thousand windows).
	minWindowPackets = 30
	ceilingZ         = 1.5
	// A loss test compares the runs of losses among its packets (lost packets judged one after
	// the other count as one run: a link that loses in bursts loses a burst's packets together)
	// with those of the last second's loss window before it (LossRecentMs). lossTestMinRuns is
	// how many runs that window must hold before a test starts; the test finds that sending less
	// lowered the loss when it saw at most lossTestMaxRuns runs, and random loss would have put
	// so few among its packets with a probability under lossTestAlpha.
	lossTestMinRuns = 4
	lossTestMaxRuns = 1
	lossTestAlpha   = 0.01
)

// Bounds that MakeParams and the Controller clamp to. They keep every quantity finite and
// meaningful; a config that passed the netcode validation is inside them and maps unchanged.
const (
	// MinThrottleFloor is the lowest throttle floor: one send in a thousand ticks.
	MinThrottleFloor = 0.001
	// MaxTickRateHz bounds the tick rate, so the floor MinSendHz/TickRateHz >= MinThrottleFloor.
	MaxTickRateHz = 1000

	// DefaultMinFrameBytes is the smallest frame the bottleneck ceiling sizes a peer's frames
	// to when Knobs.MinFrameBytes is 0: the netcode's smallest snapshot budget, a packet header
	// and one record.
	DefaultMinFrameBytes = 64

	// maxRate bounds delivery-rate samples, in bytes per second (1 PB/s).
	maxRate = 1e15

	minLossTestGain   = 0.001
	maxLossTestGain   = 0.999
	minIncreaseStep   = 0.001
	minDecreaseFactor = 0.001
	maxDecreaseFactor = 0.999
	permille          = 1000
	driftUsPerSecond  = BaselineDriftMsPerSecond * 1000
)

// The bottleneck response's constants (see the package doc).
const (
	// DrainGain is the ceiling, as a fraction of the bottleneck rate, while the queue that
	// revealed the bottleneck drains: it empties at half the bottleneck rate.
	DrainGain = 0.5
	// CruiseGain is the ceiling between probes: a tenth under the bottleneck, so that an
	// estimate a little high or a path a little jittery does not build a standing queue.
	CruiseGain = 0.9
	// ProbeGain is the ceiling of a probe, after every ProbeIntervalEvals cruising evaluations
	// without a queue: a quarter over the bottleneck, for long enough to send probeFrames
	// frames, to find out whether the path carries more now. The probe then runs as long at
	// 2-ProbeGain, which drains what it may have queued.
	ProbeGain          = 1.25
	ProbeIntervalEvals = 8
	// probeGrowth is how much faster than the bottleneck the path must have delivered a probe,
	// without pacing it, for the bottleneck estimate to grow.
	probeGrowth = 1 + (ProbeGain-1)/2
	// earlyQueueSamples is how many acknowledgement round trips in a row over the margin, each
	// longer than the one before by an eighth of the margin, reveal a building queue between
	// evaluations: neither one late ACK (a stalled client) nor a path whose delay stepped up
	// gives them.
	earlyQueueSamples = 2
	// probeFrames is how many frames a probe sends at least: its delivery rate is measured
	// from the first of them to the last, over at least two frame intervals.
	probeFrames = 3
	// linkPacedRatio is how much longer the span a path delivered bytes over must be than the
	// span they were sent over for the path, not the sender, to have set the pace: well above
	// the jitter of ACK and tick timing over minDeliverySpanMs, well under the ratio of a path
	// sent twice what it carries.
	linkPacedRatio = 1.25
	// minDeliverySpanMs is the shortest span a delivery rate is taken over.
	minDeliverySpanMs = 50
	// demandIntervalRatio is how much more than the bottleneck rate a peer's demand must be for
	// the peer to be sent every other tick under the ceiling: halfway between the rates that
	// fill a frame every tick and every other tick.
	demandIntervalRatio = 1.5
	// demandDecay is how much of the recent demand an evaluation keeps before taking the
	// interval's own send rate: about a quarter is lost in a second, half in two, longer than
	// a throttle's back-off takes before the queue behind it reveals a bottleneck.
	demandDecay = 0.97
	// maxDrainEvals bounds a drain: a queue the ACKs overstate (a path whose delay rose) must
	// not hold the peer at DrainGain for long.
	maxDrainEvals = 10
)

// Params are the controller's settings in its own units. Build them with MakeParams; a Params
// built by hand is clamped by the Controller into the same safe ranges.
type Params struct {
	// Enabled is the master switch; false pins the throttle to 1.
	Enabled bool
	// ThrottleFloor is the lowest throttle, in (0, 1]: MinSendHz / TickRateHz.
	ThrottleFloor float64
	// MaxIntervalTicks caps SendIntervalTicks: ceil(TickRateHz / MinSendHz).
	MaxIntervalTicks uint32
	// LossThreshold is the loss ratio in [0, 1] above which a peer is congested.
	LossThreshold float64
	// DelayMarginMs is how far the RTT may rise over its baseline before a peer is congested.
	DelayMarginMs uint32
	// BacklogThresholdBytes is the reliable data in flight above which a peer is congested.
	BacklogThresholdBytes uint32
	// IncreaseStep is the additive increase per healthy evaluation, in (0, 1].
	IncreaseStep float64
	// DecreaseFactor is the multiplicative decrease per congested evaluation, in (0, 1).
	DecreaseFactor float64
	// EvalIntervalTicks is how many ticks the throttle is held between evaluations, >= 1.
	EvalIntervalTicks uint32
	// BudgetFloorBytes is the smallest per-tick budget the throttle scales a static budget to.
	BudgetFloorBytes int
	// BaselineDriftUsPerTick is how far the RTT baseline may rise per tick, in microseconds:
	// BaselineDriftMsPerSecond spread over the tick rate. 0 makes the baseline a pure minimum.
	BaselineDriftUsPerTick uint32
	// BaselineHoldTicks is how many ticks the baselines do not drift after evidence of
	// congestion: BaselineHoldMs at the tick rate. 0: no hold.
	BaselineHoldTicks uint32
	// TickRateHz is the tick rate, in [1, MaxTickRateHz]: it turns the byte-rate ceiling into
	// bytes per frame.
	TickRateHz uint32
	// MinFrameBytes is the smallest frame the bottleneck ceiling sizes frames to, in
	// [1, 2^31-1].
	MinFrameBytes int
	// LossCeiling is the loss ratio in [LossThreshold, 1] over which a peer is backed off
	// whatever the loss's cause (judged on the loss window).
	LossCeiling float64
	// LossTestGain is the share, in (0, 1), of its recent send rate that a peer is held to
	// while a loss test runs.
	LossTestGain float64
	// LossRetestTicks is how long loss found random is not tested again while it goes on,
	// >= 1.
	LossRetestTicks uint32
}

// Knobs are the operator-facing settings in config units (Hz, per mille, ms, bytes), as they sit
// in the defaulted netcode config.
type Knobs struct {
	Enabled                bool
	TickRateHz             int
	MinSendHz              int
	LossThresholdPermille  int
	DelayMarginMs          int
	BacklogThresholdBytes  int
	IncreaseStepPermille   int
	DecreaseFactorPermille int
	EvalIntervalTicks      int
	BudgetFloorBytes       int
	// MinFrameBytes is the smallest useful frame (not an operator knob: the session passes the
	// protocol's); 0 means DefaultMinFrameBytes.
	MinFrameBytes        int
	LossCeilingPermille  int
	LossTestRatePermille int
	LossRetestMs         int
}

// MakeParams maps operator knobs to controller Params. It is shared by startup and live reconfig.
// Every knob is clamped into a safe range rather than refused: validation is the config's job,
// and the controller must stay well-defined whatever it is handed.
//
//	TickRateHz             [1, MaxTickRateHz]
//	MinSendHz              [1, TickRateHz]      -> ThrottleFloor, MaxIntervalTicks
//	LossThresholdPermille  [0, 1000]
//	DelayMarginMs          [0, 2^32-1]
//	BacklogThresholdBytes  [0, 2^32-1]
//	IncreaseStepPermille   [1, 1000]
//	DecreaseFactorPermille [1, 999]
//	EvalIntervalTicks      [1, 2^32-1]
//	BudgetFloorBytes       [0, max int]
//	MinFrameBytes          [1, 2^31-1], 0 -> DefaultMinFrameBytes
//	LossCeilingPermille    [LossThresholdPermille, 1000]
//	LossTestRatePermille   [1, 999]
//	LossRetestMs           [0, 2^31-1] -> LossRetestTicks, at least 1
func MakeParams(k Knobs) Params {
	tick := clampInt(k.TickRateHz, 1, MaxTickRateHz)
	minSend := clampInt(k.MinSendHz, 1, tick)
	drift := (driftUsPerSecond + tick/2) / tick // rounded to the nearest microsecond
	hold := (BaselineHoldMs*tick + 999) / 1000  // rounded up to whole ticks
	threshold := clampInt(k.LossThresholdPermille, 0, permille)
	retest := max((int64(clampInt(k.LossRetestMs, 0, math.MaxInt32))*int64(tick)+999)/1000, 1)
	return Params{
		Enabled:                k.Enabled,
		ThrottleFloor:          float64(minSend) / float64(tick),
		MaxIntervalTicks:       uint32((tick + minSend - 1) / minSend),
		LossThreshold:          float64(threshold) / permille,
		DelayMarginMs:          uint32(clampInt(k.DelayMarginMs, 0, math.MaxUint32)),
		BacklogThresholdBytes:  uint32(clampInt(k.BacklogThresholdBytes, 0, math.MaxUint32)),
		IncreaseStep:           float64(clampInt(k.IncreaseStepPermille, 1, permille)) / permille,
		DecreaseFactor:         float64(clampInt(k.DecreaseFactorPermille, 1, permille-1)) / permille,
		EvalIntervalTicks:      uint32(clampInt(k.EvalIntervalTicks, 1, math.MaxUint32)),
		BudgetFloorBytes:       clampInt(k.BudgetFloorBytes, 0, math.MaxInt),
		BaselineDriftUsPerTick: uint32(drift),
		BaselineHoldTicks:      uint32(hold),
		TickRateHz:             uint32(tick),
		MinFrameBytes:          minFrameBytes(k.MinFrameBytes),
		LossCeiling:            float64(clampInt(k.LossCeilingPermille, threshold, permille)) / permille,
		LossTestGain:           float64(clampInt(k.LossTestRatePermille, 1, permille-1)) / permille,
		LossRetestTicks:        uint32(retest),
	}
}

func minFrameBytes(b int) int {
	if b == 0 {
		return DefaultMinFrameBytes
	}
	return clampInt(b, 1, math.MaxInt32)
}

// sanitized clamps hand-built Params into the ranges MakeParams produces, so that no field can
// make the throttle NaN, zero or stuck. NaN takes the lower bound.
func (p Params) sanitized() Params {
	p.ThrottleFloor = clampFloat(p.ThrottleFloor, MinThrottleFloor, 1)
	p.MaxIntervalTicks = max(p.MaxIntervalTicks, 1)
	p.LossThreshold = clampFloat(p.LossThreshold, 0, 1)
	p.IncreaseStep = clampFloat(p.IncreaseStep, minIncreaseStep, 1)
	p.DecreaseFactor = clampFloat(p.DecreaseFactor, minDecreaseFactor, maxDecreaseFactor)
	p.EvalIntervalTicks = max(p.EvalIntervalTicks, 1)
	p.BudgetFloorBytes = max(p.BudgetFloorBytes, 0)
	p.TickRateHz = min(max(p.TickRateHz, 1), MaxTickRateHz)
	p.MinFrameBytes = clampInt(p.MinFrameBytes, 1, math.MaxInt32)
	p.LossCeiling = clampFloat(p.LossCeiling, p.LossThreshold, 1)
	p.LossTestGain = clampFloat(p.LossTestGain, minLossTestGain, maxLossTestGain)
	p.LossRetestTicks = max(p.LossRetestTicks, 1)
	return p
}

func clampInt(v, lo, hi int) int {
	return min(max(v, lo), hi)
}

// clampFloat clamps v into [lo, hi]; NaN, which fails every comparison, becomes lo.
func clampFloat(v, lo, hi float64) float64 {
	if !(v >= lo) {
		return lo
	}
	return min(v, hi)
}
