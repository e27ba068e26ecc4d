package congestion

import "math"

// lossState is what the controller knows of a peer's loss (see the package doc, "The loss
// test").
type lossState uint8

const (
	lossUnknown    lossState = iota // no loss, or not yet tested
	lossTesting                     // the peer is held under the test's ceiling
	lossRandom                      // sending less did not lower the loss
	lossCongestive                  // sending less lowered it
)

// lossResponse follows the packets the loss estimator judges (Delivery.Judged, Lost and
// JudgedSentMs) and decides what a peer's loss means: the loss window, against the ceiling,
// and the loss test with its verdict.
type lossResponse struct {
	// seen is the judgment count at the last tick.
	seen Delivery
	// lost, runs and judged are the loss window: the decayed counts of the packets judged
	// since the window restarted (if windowed, only those sent from fromMs on), of those lost
	// and of their runs; decay is the factor they decay by at each evaluation,
	// exp(-evaluation interval / LossWindowMs).
	lost, runs, judged float64
	fromMs             uint32
	windowed           bool
	decay              float64
	// rate is the rate the path delivered the peer's bytes at lately: an average over the
	// evaluation intervals whose weight falls by rateDecay every evaluation,
	// exp(-evaluation interval / LossRateMs).
	rate, rateDecay float64
	// recentRuns and recentJudged are a faster loss window, whose weight falls by recentDecay
	// at each evaluation, exp(-evaluation interval / LossRecentMs): what a loss test compares
	// its packets with.
	recentRuns, recentJudged, recentDecay float64

	state lossState
	// ticks is how long the state has lasted.
	ticks uint32
	// holding: the loss was over the ceiling, and is still over the threshold with no verdict
	// since; the throttle does not climb back into it.
	holding bool
	// The test: its packets are those sent from testFromMs on; testLost of the testJudged of
	// them judged so far were lost, in testRuns runs. beforeRuns and beforeJudged are the loss
	// window's when it started, ceiling the byte rate it holds the peer to.
	testFromMs                     uint32
	testLost, testRuns, testJudged uint64
	beforeRuns, beforeJudged       float64
	ceiling                        float64
}

// reset starts the loss response afresh for p.
func (l *lossResponse) reset(p *Params) {
	*l = lossResponse{}
	l.setParams(p)
}

// setParams takes new Params: the window's decay follows the evaluation interval.
func (l *lossResponse) setParams(p *Params) {
	evalMs := 1000 * float64(p.EvalIntervalTicks) / float64(p.TickRateHz)
	l.decay = math.Exp(-evalMs / LossWindowMs)
	l.rateDecay = math.Exp(-evalMs / LossRateMs)
	l.recentDecay = math.Exp(-evalMs / LossRecentMs)
}

// forget drops the verdict and the window (the controller was disabled).
func (l *lossResponse) forget() {
	l.state, l.ticks, l.ceiling, l.holding = lossUnknown, 0, 0, false
	l.lost, l.runs, l.judged, l.windowed = 0, 0, 0, false
	l.recentRuns, l.recentJudged = 0, 0
}

// sync takes the judgment count without counting it (the controller is disabled).
func (l *lossResponse) sync(d Delivery) { l.seen = d }

// track takes a tick's judgment count.
func (l *lossResponse) track(d Delivery) {
	dj, dl, dr := d.Judged-l.seen.Judged, d.Lost-l.seen.Lost, d.LossRuns-l.seen.LossRuns
	if d.Judged < l.seen.Judged || d.Lost < l.seen.Lost || d.LossRuns < l.seen.LossRuns || dl > dj || dr > dl {
		dj, dl, dr = 0, 0, 0 // a count that went back is a new estimator: start from it
	}
	l.seen = d
	if dj == 0 {
		return
	}
	// Judgments come in send order, a tick's batch together: the newest judged packet's send
	// time places the batch.
	if !l.windowed || int32(d.JudgedSentMs-l.fromMs) >= 0 {
		l.judged += float64(dj)
		l.lost += float64(dl)
		l.runs += float64(dr)
		l.recentJudged += float64(dj)
		l.recentRuns += float64(dr)
	}
	if l.state == lossTesting && int32(d.JudgedSentMs-l.testFromMs) >= 0 {
		l.testJudged += dj
		l.testLost += dl
		l.testRuns += dr
	}
}

// testing reports whether a loss test holds the peer under its ceiling.
func (l *lossResponse) testing() bool { return l.state == lossTesting }

// holds reports whether the throttle must not rise: a test runs, or the loss that was over the
// ceiling is still over the threshold and has no verdict yet.
func (l *lossResponse) holds() bool { return l.state == lossTesting || l.holding }

// enter moves to state st; a verdict ends the hold after a loss over the ceiling.
func (l *lossResponse) enter(st lossState) {
	l.state, l.ticks = st, 0
	l.holding = l.holding && st == lossUnknown
	if st != lossTesting {
		l.ceiling = 0
	}
}

// evaluate moves the loss response at an evaluation at nowMs, given the loss ratio and whether
// the interval showed a queue, and reports whether the peer's loss is congestion: loss over the
// ceiling; loss over the threshold with a queue, or while sending less was last found to lower
// it; or a test that has just found so.
func (l *lossResponse) evaluate(p *Params, c *Controller, loss float64, queue bool, nowMs uint32) bool {
	lossy := loss > p.LossThreshold // NaN compares false: no evidence, no trigger
	l.lost *= l.decay
	l.runs *= l.decay
	l.judged *= l.decay
	l.recentRuns *= l.recentDecay
	l.recentJudged *= l.recentDecay
	if r := c.deliveredRate(); r > 0 {
		if l.rate == 0 {
			l.rate = r
		}
		l.rate = l.rateDecay*l.rate + (1-l.rateDecay)*r
	}
	l.holding = l.holding && lossy
	l.ticks = satAdd(l.ticks, p.EvalIntervalTicks)
	if l.overCeiling(p) {
		// Whatever its cause. The next verdict waits for packets sent after this back-off, and
		// the loss is tested afresh: loss this heavy may have started since the last test.
		l.lost, l.runs, l.judged, l.fromMs, l.windowed = 0, 0, 0, nowMs, true
		l.recentRuns, l.recentJudged = 0, 0
		if l.state != lossCongestive {
			l.enter(lossUnknown)
		}
		l.holding = true
		return true
	}
	switch l.state {
	case lossUnknown:
		if lossy && !queue {
			l.startTest(c, nowMs)
		}
	case lossTesting:
		if queue {
			l.enter(lossUnknown)
			break
		}
		switch {
		case l.testRuns > lossTestMaxRuns:
			l.enter(lossRandom)
		case l.sentLessHelped():
			l.enter(lossCongestive)
			return true
		case l.ticks >= msTicks(p, LossTestMaxMs):
			// Too few packets to tell: no back-off on so little evidence.
			l.enter(lossRandom)
		}
	case lossRandom:
		if l.judged >= minWindowPackets && l.lost < LossEvidenceShare*p.LossThreshold*l.judged {
			l.enter(lossUnknown) // the loss stopped
		} else if lossy && !queue && l.ticks >= p.LossRetestTicks {
			l.startTest(c, nowMs)
		}
	case lossCongestive:
		if l.ticks >= msTicks(p, LossCongestiveMs) {
			l.enter(lossUnknown)
		}
	}
	return lossy && (queue || l.state == lossCongestive)
}

// startTest starts a loss test at nowMs: the peer is held to LossTestGain of the rate the path
// delivered its bytes at lately, or of its ceiling if it has one, and the packets sent from now
// on are counted. On a path that drops what exceeds a rate, the delivery rate is that rate, so
// the test sends under it. A test waits until the last second's window (LossRecentMs) holds
// lossTestMinRuns runs of losses to compare with, and a peer with nothing delivered lately is not
// tested.
func (l *lossResponse) startTest(c *Controller, nowMs uint32) {
	r := c.bottleneckCeiling()
	if r <= 0 {
		r = l.rate
	}
	if r <= 0 || l.recentRuns < lossTestMinRuns {
		return
	}
	l.enter(lossTesting)
	l.ceiling = c.p.LossTestGain * r
	l.testFromMs, l.testLost, l.testRuns, l.testJudged = nowMs, 0, 0, 0
	l.beforeRuns, l.beforeJudged = l.recentRuns, l.recentJudged
}

// overCeiling reports whether the loss is over the ceiling: the loss window's, or while a test
// runs the loss of its own packets (those sent before it are what it tests against). Over means
// by more than ceilingZ standard deviations of a loss at the ceiling, so that random loss a
// little under it does not cross it on a few unlucky packets.
func (l *lossResponse) overCeiling(p *Params) bool {
	lost, judged := l.lost, l.judged
	if l.state == lossTesting {
		lost, judged = float64(l.testLost), float64(l.testJudged)
	}
	q := p.LossCeiling
	return judged >= minWindowPackets && lost-q*judged > ceilingZ*math.Sqrt(judged*q*(1-q))
}

// sentLessHelped reports whether the test's packets show fewer runs of losses than the packets
// of the window before it, by more than chance explains: if the loss were random, the runs of
// both would fall among their packets alike, and the test's share of them would be at most
// lossTestMaxRuns with a probability under lossTestAlpha.
func (l *lossResponse) sentLessHelped() bool {
	if l.testRuns > lossTestMaxRuns || l.testJudged == 0 {
		return false
	}
	runs := l.beforeRuns + float64(l.testRuns)
	f := float64(l.testJudged) / (l.beforeJudged + float64(l.testJudged))
	// P(at most one of the runs among the test's packets), binomial over the runs.
	p := math.Pow(1-f, runs)
	if l.testRuns == 1 {
		p += runs * f * math.Pow(1-f, runs-1)
	}
	return p < lossTestAlpha
}

// msTicks is ms in ticks at p's tick rate, rounded up.
func msTicks(p *Params, ms uint32) uint32 {
	return uint32((uint64(ms)*uint64(p.TickRateHz) + 999) / 1000)
}

func satAdd(a, b uint32) uint32 {
	if a > math.MaxUint32-b {
		return math.MaxUint32
	}
	return a + b
}
