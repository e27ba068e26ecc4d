package congestion

import "math"

// delay is a controller's delay signals: the two round trips against their baselines, the
// acknowledgement round trips' signs of a queue growing, and the delay episode that tells a
// queue from a longer path.
type delay struct {
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
	// hold is how many more ticks the baselines do not drift (Params.BaselineHoldTicks).
	hold uint32
	// catchUp is how many more ticks ENet's RTT may take to reach its baseline after a path
	// change raised it: ENet smooths its RTT over pings a quarter of a second apart, so it
	// climbs to a longer path over seconds. Until it is within half the margin of the baseline
	// it neither lowers the baseline nor reads as delay.
	catchUp uint32

	ep episode
}

// episode is a stretch of evaluations that found the peer delayed. It starts pending: the
// evaluation that finds the delay backs the peer off once, and the ones after hold while the
// acknowledgement round trip shows what the delay is. A queue drains when sent less, or grows
// on if that was not enough: either way the episode is a queue. A longer path does neither: a
// round trip level for PathChangeEvals evaluations is a path change.
type episode struct {
	active bool
	queue  bool
	// levelMs is the acknowledgement round trip the delay rose to (the first interval's
	// smallest), lowMs the smallest interval minimum since, and evals how many evaluations it
	// has held level. preThrottle is the throttle before the episode.
	// tolMs is how far from levelMs the round trip may wander and still hold level.
	levelMs, lowMs, tolMs uint32
	evals                 uint32
	preThrottle           float64
}

// levelTolerance divides the larger of the delay margin and a delay's rise into the level the
// round trip must hold for the delay to be a longer path.
const levelTolerance = 4

// delayVerdict is what an evaluation's delay means for the throttle.
type delayVerdict uint8

const (
	delayNone    delayVerdict = iota // not delayed, or a longer path found
	delayOnset                       // the first evaluation of a pending episode: back off once
	delayPending                     // the round trip has not yet shown what the delay is: hold
	delayQueue                       // a queue: back off
)

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

// raise lifts the baseline by us.
func (b *runningMin) raise(us uint64) {
	if b.ok {
		b.us = min(b.us+us, math.MaxUint64/2)
	}
}

// exceeds reports whether us lies more than margin above the baseline. The subtraction is
// guarded: a sample can be below the baseline only until it is observed.
func (b *runningMin) exceeds(us, margin uint64) bool {
	return b.ok && us > b.us && us-b.us > margin
}

func (b *runningMin) ms() uint32 { return uint32(min(b.us/1000, math.MaxUint32)) }

// track takes a tick's round trips: the baselines (whose drift accrues every tick unless held),
// the interval's smallest acknowledgement round trip and the run of them rising over the margin.
func (d *delay) track(p *Params, s Sample) {
	drift := p.BaselineDriftUsPerTick
	if d.hold > 0 {
		drift = 0
		d.hold--
	}
	if s.RTTMs != 0 { // 0 is "unknown"; the baseline drifts only on ticks with an RTT
		if d.catchUp > 0 {
			d.catchUp--
			if uint64(s.RTTMs)*1000+uint64(p.DelayMarginMs)*500 >= d.baseline.us {
				d.catchUp = 0
			}
		}
		if d.catchUp == 0 {
			d.baseline.drift(drift)
			d.baseline.observe(uint64(s.RTTMs) * 1000)
		}
	}
	d.ackBaseline.drift(drift)
	if !s.HaveAckRTT {
		return
	}
	d.ackBaseline.observe(uint64(s.AckRTTMs) * 1000)
	rise := p.DelayMarginMs / 8
	switch {
	case !d.ackBaseline.exceeds(uint64(s.AckRTTMs)*1000, uint64(p.DelayMarginMs)*1000):
		d.ackRise = 0
	case d.ackRise > 0 && s.AckRTTMs >= d.lastAckMs+rise:
		d.ackRise++
	default:
		d.ackRise = 1
	}
	d.lastAckMs = s.AckRTTMs
	if !d.haveAckMin || s.AckRTTMs < d.ackMinMs {
		d.ackMinMs, d.haveAckMin = s.AckRTTMs, true
	}
}

// delayed reports, at an evaluation, whether the interval's acknowledgement round trips (all
// of them) were over their baseline plus the margin (ack), and whether ENet's RTT was (rtt).
func (d *delay) delayed(p *Params, rttMs uint32) (ack, rtt bool) {
	margin := uint64(p.DelayMarginMs) * 1000
	ack = d.haveAckMin && d.ackBaseline.exceeds(uint64(d.ackMinMs)*1000, margin)
	rtt = d.catchUp == 0 && rttMs != 0 && d.baseline.exceeds(uint64(rttMs)*1000, margin)
	return ack, rtt
}

// episode moves the delay episode at an evaluation, given whether the acknowledgement round
// trips and ENet's RTT are over their margins, whether the interval showed a queue (a path that
// delivered slower than it was sent to, twice in a row), the throttle before the evaluation and
// p. It returns what the delay means and whether the peer has a queue: the interval's evidence,
// or an episode found to be one. Evidence of a queue restarts the baselines' hold. A path change
// raises both baselines to the level the round trip held and returns the throttle the back-off
// is undone to (ok).
func (d *delay) episode(p *Params, ack, rtt, evidence bool, throttle float64) (v delayVerdict, queued bool, undo float64, ok bool) {
	ep := &d.ep
	if evidence {
		d.hold = p.BaselineHoldTicks
	}
	if !ack && !rtt {
		*ep = episode{}
		return delayNone, evidence, 0, false
	}
	if !ep.active {
		// The level holds within a quarter of the margin, or of the rise if larger: the round
		// trips of a jittery path wander, a queue that drains falls by much of its depth in an
		// evaluation or two.
		rise := uint32(min(max(int64(d.ackMinMs)-int64(d.ackBaseline.ms()), 0), math.MaxUint32))
		*ep = episode{active: true, levelMs: d.ackMinMs, lowMs: d.ackMinMs,
			tolMs: max(p.DelayMarginMs, rise) / levelTolerance, preThrottle: throttle}
		// The baselines do not follow the delay while it is judged.
		d.hold = p.BaselineHoldTicks
		if evidence || !ack {
			// Delay that only ENet's RTT shows cannot be followed by its level (ENet's
			// smoothing makes any rise a ramp): it is taken as a queue.
			return d.queue(p), true, 0, false
		}
		return delayOnset, false, 0, false
	}
	switch {
	case ep.queue:
		return delayQueue, true, 0, false
	case evidence:
	case !d.haveAckMin:
		return delayPending, false, 0, false
	case !ack || d.ackMinMs+ep.tolMs < ep.levelMs || d.ackMinMs > ep.levelMs+ep.tolMs:
		// It fell when the peer was sent less, or grew although it was.
	default:
		ep.evals++
		ep.lowMs = min(ep.lowMs, d.ackMinMs)
		if ep.evals < PathChangeEvals {
			return delayPending, false, 0, false
		}
		// A longer path: the baselines step up to it, and the peer gets back what the delay
		// cost it.
		if step := uint64(ep.lowMs) * 1000; step > d.ackBaseline.us {
			step -= d.ackBaseline.us
			d.ackBaseline.raise(step)
			d.baseline.raise(step)
			d.catchUp = msTicks(p, enetCatchUpMs)
		}
		undo = ep.preThrottle
		*ep = episode{}
		return delayNone, false, undo, true
	}
	return d.queue(p), true, 0, false
}

// queue marks the episode a queue; the baselines hold from here.
func (d *delay) queue(p *Params) delayVerdict {
	d.ep.queue = true
	d.hold = p.BaselineHoldTicks
	return delayQueue
}
