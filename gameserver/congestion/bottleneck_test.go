package congestion

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

const (
	testHz     = 60
	testBaseMs = 20 // the path's round trip without a queue
)

// msAt is tick i's time.
func msAt(i int) uint32 { return uint32(1_000_000 + i*1000/testHz) }

// fluid is a path whose delivery count grows steadily: from fromMs on, the bytes sent at sendRate
// are delivered at deliverRate (bytes per second, deliverRate <= sendRate), on top of base.
type fluid struct {
	fromMs                float64
	sendRate, deliverRate float64
	base                  Delivery
}

func (f fluid) at(nowMs uint32) Delivery {
	d := f.deliverRate * (float64(nowMs) - f.fromMs) / 1000
	return Delivery{
		Bytes:  f.base.Bytes + uint64(d),
		AtMs:   nowMs,
		SentMs: uint32(f.fromMs + d*1000/f.sendRate),
	}
}

// sample is the tick's Sample on a path whose delivery count is d: the newest delivered packet's
// round trip is the time since it was sent plus the path's base.
func sample(nowMs uint32, d Delivery) Sample {
	return Sample{
		RTTMs: testBaseMs, AckRTTMs: nowMs - d.SentMs + testBaseMs, HaveAckRTT: true,
		Delivered: d, NowMs: nowMs,
	}
}

// run steps c over the ticks [from, to) with the samples f gives and returns the first tick at
// which c had a ceiling, -1 if none.
func run(c *Controller, from, to int, f func(i int) Sample) int {
	first := -1
	for i := from; i < to; i++ {
		c.Step(f(i))
		if first < 0 && c.ByteRateCeiling() > 0 {
			first = i
		}
	}
	return first
}

// warm runs c for a second on a healthy path sending and delivering 6000 B/s, and returns the
// path so that a scenario can continue from it.
func warm(t *testing.T, c *Controller) fluid {
	t.Helper()
	c.Reset(triggerParams())
	healthy := fluid{fromMs: float64(msAt(0)), sendRate: 6000, deliverRate: 6000}
	if got := run(c, 0, testHz, func(i int) Sample { return sample(msAt(i), healthy.at(msAt(i))) }); got >= 0 {
		t.Fatalf("a healthy path got a ceiling at tick %d", got)
	}
	return healthy
}

func TestDeliveryRate(t *testing.T) {
	from := Delivery{Bytes: 1000, AtMs: 5000, SentMs: 4980}
	tests := []struct {
		name  string
		to    Delivery
		rate  float64
		paced bool
		ok    bool
	}{
		{"kept pace", Delivery{Bytes: 1600, AtMs: 5100, SentMs: 5080}, 6000, false, true},
		{"sent faster than delivered: the path's rate", Delivery{Bytes: 1300, AtMs: 5100, SentMs: 5030}, 3000, true, true},
		{"delivered over a quarter longer than sent", Delivery{Bytes: 1300, AtMs: 5100, SentMs: 5059}, 3000, true, true},
		{"delivered a quarter longer: jitter", Delivery{Bytes: 1300, AtMs: 5100, SentMs: 5060}, 3000, false, true},
		{"sent slower than delivered: the sender's rate", Delivery{Bytes: 1300, AtMs: 5100, SentMs: 5180}, 1500, false, true},
		{"too short a span", Delivery{Bytes: 1300, AtMs: 5049, SentMs: 5000}, 0, false, false},
		{"nothing delivered", Delivery{Bytes: 1000, AtMs: 5100, SentMs: 5080}, 0, false, false},
		{"sends out of order", Delivery{Bytes: 1300, AtMs: 5100, SentMs: 4970}, 0, false, false},
		{"clock wrapped", Delivery{Bytes: 1600, AtMs: 5100 - 1<<32 + 1<<32, SentMs: 5080}, 6000, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rate, paced, ok := deliveryRate(from, tt.to)
			if math.Abs(rate-tt.rate) > 1e-9 || paced != tt.paced || ok != tt.ok {
				t.Errorf("deliveryRate = %v, %v, %v; want %v, %v, %v", rate, paced, ok, tt.rate, tt.paced, tt.ok)
			}
		})
	}
	// Counts taken across the 32-bit wrap of the millisecond clock.
	a := Delivery{Bytes: 1, AtMs: math.MaxUint32 - 40, SentMs: math.MaxUint32 - 60}
	b := Delivery{Bytes: 601, AtMs: 59, SentMs: 39}
	if rate, paced, ok := deliveryRate(a, b); rate != 6000 || paced || !ok {
		t.Errorf("across the wrap: %v, %v, %v", rate, paced, ok)
	}
}

// A queue that builds fast — every ACK later than the last by more than an eighth of the margin,
// the path delivering slower than it is sent to — sets the ceiling at once, at DrainGain of the
// path's delivery rate, without waiting for the end of an evaluation interval. A delay that
// rises once and stays, a single late ACK and a delay that grows on a path that keeps pace do
// not.
func TestBottleneckFoundEarly(t *testing.T) {
	const onset = testHz
	tests := []struct {
		name   string
		sample func(healthy fluid) func(i int) Sample
		found  bool
	}{
		{
			name: "sent twice what the path delivers",
			sample: func(h fluid) func(int) Sample {
				q := fluid{fromMs: float64(msAt(onset)), sendRate: 6000, deliverRate: 3000, base: h.at(msAt(onset))}
				return func(i int) Sample { return sample(msAt(i), q.at(msAt(i))) }
			},
			found: true,
		},
		{
			name: "the path's delay steps up by 80 ms",
			sample: func(h fluid) func(int) Sample {
				return func(i int) Sample {
					now := msAt(i)
					if now < msAt(onset)+80 {
						// Nothing is delivered, nothing acknowledged for 80 ms.
						return Sample{RTTMs: testBaseMs, Delivered: h.at(msAt(onset)), NowMs: now}
					}
					// Then the path delivers at the rate it is sent to, each packet 80 ms later.
					d := h.at(now - 80)
					d.AtMs = now
					return sample(now, d)
				}
			},
		},
		{
			name: "one ACK 200 ms late",
			sample: func(h fluid) func(int) Sample {
				return func(i int) Sample {
					s := sample(msAt(i), h.at(msAt(i)))
					if i == onset {
						s.AckRTTMs = 200
					}
					return s
				}
			},
		},
		{
			name: "ACKs later and later on a path that keeps pace",
			sample: func(h fluid) func(int) Sample {
				return func(i int) Sample {
					s := sample(msAt(i), h.at(msAt(i)))
					s.AckRTTMs += uint32(max(i-onset, 0) * 8)
					return s
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Controller
			healthy := warm(t, &c)
			f := tt.sample(healthy)
			at := run(&c, onset, onset+2*testHz, func(i int) Sample {
				s := f(i)
				if at := c.ByteRateCeiling(); at > 0 && !tt.found {
					t.Fatalf("tick %d: ceiling %v", i, at)
				}
				return s
			})
			if !tt.found {
				if at >= 0 {
					t.Fatalf("a ceiling from tick %d", at)
				}
				return
			}
			// The ACKs cross the margin 80 ms after the onset (half the time sent is queued)
			// and rise 8 ms a tick: the ceiling must follow within two more ticks, where an
			// evaluation could take up to two intervals.
			if at < 0 || msAt(at)-msAt(onset) > 80+2*1000/testHz+1 {
				t.Fatalf("ceiling from tick %d (%d ms after the onset)", at, msAt(at)-msAt(onset))
			}
			if r := c.b.rate; r < 2900 || r > 3100 {
				t.Errorf("bottleneck %v B/s, want the path's 3000", r)
			}
			if d := c.b.demand; d < 5700 || d > 6300 {
				t.Errorf("demand %v B/s, want the 6000 the peer was sent", d)
			}
		})
	}
}

// The demand is what the peer was sent recently without a ceiling: a throttle that backed the
// peer off just before the queue showed does not make it look smaller.
func TestBottleneckDemand(t *testing.T) {
	var c Controller
	healthy := warm(t, &c) // 6000 B/s
	// For two evaluation intervals the peer is sent 4000 B/s, which the path delivers; then the
	// path delivers 3000.
	const dip, onset = testHz, testHz + 12
	slow := fluid{fromMs: float64(msAt(dip)), sendRate: 4000, deliverRate: 4000, base: healthy.at(msAt(dip))}
	if got := run(&c, dip, onset, func(i int) Sample { return sample(msAt(i), slow.at(msAt(i))) }); got >= 0 {
		t.Fatalf("a ceiling at tick %d before the path became the bottleneck", got)
	}
	q := fluid{fromMs: float64(msAt(onset)), sendRate: 4000, deliverRate: 3000, base: slow.at(msAt(onset))}
	at := run(&c, onset, onset+2*testHz, func(i int) Sample { return sample(msAt(i), q.at(msAt(i))) })
	if at < 0 {
		t.Fatal("no ceiling")
	}
	if d := c.b.demand; d < 0.7*6000 || d > 6100 {
		t.Errorf("demand %v B/s, want most of the 6000 the peer was sent until %d ms before", d, msAt(at)-msAt(onset))
	}
	if c.demandIntervalTicks() != 2 {
		t.Errorf("demand interval %d, want 2 (the path carries half the demand)", c.demandIntervalTicks())
	}
	// A peer sent little for a while has a small demand.
	c.b.release()
	quiet := fluid{fromMs: float64(msAt(onset + 2*testHz)), sendRate: 1000, deliverRate: 1000, base: q.at(msAt(onset + 2*testHz))}
	run(&c, onset+2*testHz, onset+4*testHz, func(i int) Sample { return sample(msAt(i), quiet.at(msAt(i))) })
	if d := c.b.demand; d < 900 || d > 1200 {
		t.Errorf("demand %v B/s after two quiet seconds at 1000, want about 1000", d)
	}
}

// A queue that builds slowly — each ACK only a little later than the last, but each interval's
// over the margin and later than the interval before's — is found at an evaluation.
func TestBottleneckFoundFromIntervals(t *testing.T) {
	var c Controller
	healthy := warm(t, &c)
	const onset = testHz
	// Sent 1.3 times what the path delivers: the round trip grows 3.5 ms a tick, under the
	// early trigger's rise of 5 ms.
	q := fluid{fromMs: float64(msAt(onset)), sendRate: 3900, deliverRate: 3000, base: healthy.at(msAt(onset))}
	at := run(&c, onset, onset+3*testHz, func(i int) Sample { return sample(msAt(i), q.at(msAt(i))) })
	if at < 0 {
		t.Fatal("no ceiling")
	}
	if at%int(c.p.EvalIntervalTicks) != int(c.p.EvalIntervalTicks)-1 {
		t.Errorf("ceiling from tick %d, not at an evaluation", at)
	}
	if r := c.b.rate; r < 2900 || r > 3100 {
		t.Errorf("bottleneck %v B/s, want the path's 3000", r)
	}
}

func TestBottleneckOverestimateCorrected(t *testing.T) {
	var c Controller
	healthy := warm(t, &c)
	const onset = testHz
	// Cruising under a bottleneck rate a fifth over what the path carries: sent its ceiling,
	// 1.08 times what the path delivers (under linkPacedRatio), the queue grows 6 ms an
	// evaluation.
	c.b.rate = 3600
	c.b.enter(phaseCruise)
	q := fluid{fromMs: float64(msAt(onset)), sendRate: 3600 * CruiseGain, deliverRate: 3000, base: healthy.at(msAt(onset))}
	run(&c, onset, onset+2*testHz, func(i int) Sample { return sample(msAt(i), q.at(msAt(i))) })
	if r := c.b.rate; r < 2900 || r > 3100 {
		t.Errorf("bottleneck %v B/s after the queue grew at the cruise, want the path's 3000", r)
	}
	if c.b.phase == phaseNone {
		t.Error("the ceiling was released")
	}
}

// withBottleneck returns a controller cruising under a bottleneck of rate B/s, found at tick 0.
func withBottleneck(rate float64) Controller {
	var c Controller
	c.Reset(triggerParams())
	c.b.rate = rate
	c.b.enter(phaseCruise)
	return c
}

// evalTicks steps c through one evaluation interval with the sample f gives for each tick.
func evalTicks(c *Controller, tick *int, f func(i int) Sample) {
	for range c.p.EvalIntervalTicks {
		c.Step(f(*tick))
		*tick++
	}
}

func TestDrainEnds(t *testing.T) {
	at := func(ackMs uint32) func(int) Sample {
		return func(i int) Sample { return Sample{RTTMs: 20, AckRTTMs: ackMs, HaveAckRTT: true, NowMs: msAt(i)} }
	}
	t.Run("when the ACKs come back within the margin", func(t *testing.T) {
		var c Controller
		c.Reset(triggerParams())
		tick := 0
		evalTicks(&c, &tick, at(20))
		c.b.rate, c.b.drainEvals = 3000, maxDrainEvals
		c.b.enter(phaseDrain)
		evalTicks(&c, &tick, at(100))
		if got := c.ByteRateCeiling(); got != 3000*DrainGain {
			t.Fatalf("queued interval: ceiling %v, want the drain's %v", got, 3000*DrainGain)
		}
		evalTicks(&c, &tick, at(25))
		if got := c.ByteRateCeiling(); got != 3000*CruiseGain {
			t.Fatalf("after an interval within the margin: ceiling %v, want the cruise's %v", got, 3000*CruiseGain)
		}
	})
	t.Run("after twice the time the queue the ACKs showed takes to drain", func(t *testing.T) {
		var c Controller
		healthy := warm(t, &c)
		const onset = testHz
		q := fluid{fromMs: float64(msAt(onset)), sendRate: 6000, deliverRate: 3000, base: healthy.at(msAt(onset))}
		tick := onset
		for c.ByteRateCeiling() == 0 {
			c.Step(sample(msAt(tick), q.at(msAt(tick))))
			tick++
		}
		// The ACK that revealed the queue, over the baseline of 20 ms, sets the drain's length.
		queueMs := float64(c.d.lastAckMs - testBaseMs)
		want := uint32(math.Ceil(2 * queueMs / (1 - DrainGain) / 100))
		if c.b.drainEvals != want || want < 2 {
			t.Fatalf("drain of %d evaluations after a %v ms queue, want %d", c.b.drainEvals, queueMs, want)
		}
		// The round trip then stays where it is, as on a path whose delay stepped up: the drain
		// ends after its evaluations (the first of them the one it began in) all the same.
		evals := uint32(0)
		for c.b.phase == phaseDrain && evals <= maxDrainEvals {
			c.Step(at(100)(tick))
			tick++
			if c.sinceEval == 0 {
				evals++
			}
		}
		if c.b.phase != phaseCruise || evals != want {
			t.Fatalf("phase %d after %d evaluations, want cruising after %d", c.b.phase, evals, want)
		}
	})
}

func TestThrottleUnderCeiling(t *testing.T) {
	delay := func(i int) Sample { return Sample{RTTMs: 20, AckRTTMs: 200, HaveAckRTT: true, NowMs: msAt(i)} }
	heavy := func(i int) Sample {
		return Sample{LossRatio: 0.5, RTTMs: 20, NowMs: msAt(i), Delivered: Delivery{Judged: 100, Lost: 50, LossRuns: 30}}
	}
	random := func(i int) Sample { return Sample{LossRatio: 0.05, RTTMs: 20, NowMs: msAt(i)} }
	for _, tt := range []struct {
		name    string
		ceiling bool
		sample  func(int) Sample
		want    float64
	}{
		{"delay with a ceiling: the ceiling answers it", true, delay, 1},
		{"delay without: the throttle backs off", false, delay, 0.7},
		{"loss over the loss ceiling with a ceiling: the throttle backs off", true, heavy, 0.7},
		{"loss with a ceiling and no queue: the throttle holds", true, random, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c Controller
			c.Reset(triggerParams())
			tick := 0
			evalTicks(&c, &tick, func(i int) Sample { return Sample{RTTMs: 20, AckRTTMs: 20, HaveAckRTT: true, NowMs: msAt(i)} })
			if tt.ceiling {
				c.b.rate = 3000
				c.b.enter(phaseCruise)
			}
			evalTicks(&c, &tick, tt.sample)
			if got := c.Throttle(); got != tt.want {
				t.Errorf("throttle %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCeilingReleasedWhenNotNeeded(t *testing.T) {
	clean := func(bound bool) func(int) Sample {
		return func(i int) Sample {
			return Sample{RTTMs: 20, AckRTTMs: 20, HaveAckRTT: true, NowMs: msAt(i), CeilingBound: bound && i%3 == 0}
		}
	}
	c := withBottleneck(3000)
	tick := 0
	for range ProbeIntervalEvals - 1 {
		evalTicks(&c, &tick, clean(true))
		if c.ByteRateCeiling() != 3000*CruiseGain {
			t.Fatalf("a peer the ceiling cuts lost its ceiling: %v", c.ByteRateCeiling())
		}
	}
	evalTicks(&c, &tick, clean(false))
	if c.ByteRateCeiling() != 0 || c.FrameCeilingBytes() != 0 || c.SendIntervalTicks() != 1 {
		t.Fatalf("a peer that wanted no more than the ceiling keeps ceiling %v, frame %d, interval %d",
			c.ByteRateCeiling(), c.FrameCeilingBytes(), c.SendIntervalTicks())
	}

	// Sent every other tick for its demand, a peer wants about the ceiling's frame, and a frame
	// the ceiling did not cut says nothing of what it wants every tick: only a probe releases it.
	c = withBottleneck(5000)
	c.b.demand = 10000
	tick = 0
	for range ProbeIntervalEvals - 1 {
		evalTicks(&c, &tick, clean(false))
		if c.b.phase != phaseCruise || c.SendIntervalTicks() != 2 {
			t.Fatalf("a peer sent less often for its demand left the cruise: phase %d, interval %d", c.b.phase, c.SendIntervalTicks())
		}
	}
	evalTicks(&c, &tick, clean(false))
	if c.b.phase != phaseProbeUp {
		t.Fatalf("phase %d after a cruise without a queue, want a probe", c.b.phase)
	}
}

// probeRun cruises c under its ceiling until a probe starts, then runs the probe, and the
// probes that follow it at once, on a path that delivers the probe's packets as path gives, and
// returns the ceilings the probes went through.
func probeRun(t *testing.T, c *Controller, bound bool, path func(fromMs uint32) fluid) []float64 {
	return probeRunN(t, c, bound, path, math.MaxInt)
}

// probeRunN is probeRun stopping after n probes.
func probeRunN(t *testing.T, c *Controller, bound bool, path func(fromMs uint32) fluid, n int) []float64 {
	t.Helper()
	tick := 0
	before := Delivery{Bytes: 100_000, AtMs: msAt(0) - 20, SentMs: msAt(0) - 40}
	cruise := func(i int) Sample {
		d := before
		d.AtMs, d.SentMs = msAt(i)-1, msAt(i)-testBaseMs
		return Sample{RTTMs: 20, AckRTTMs: testBaseMs, HaveAckRTT: true, Delivered: d, NowMs: msAt(i), CeilingBound: true}
	}
	for c.b.phase == phaseCruise {
		evalTicks(c, &tick, cruise)
		if tick > 100*int(c.p.EvalIntervalTicks) {
			t.Fatal("no probe")
		}
	}
	var ceilings []float64
	p := path(msAt(tick))
	p.base = before
	probes, from := 1, c.b.probe.fromMs
	for c.b.phase == phaseProbeUp || c.b.phase == phaseProbeDown {
		if c.b.probe.fromMs != from {
			if probes++; probes > n {
				break
			}
			from = c.b.probe.fromMs
		}
		ceilings = append(ceilings, c.ByteRateCeiling())
		evalTicks(c, &tick, func(i int) Sample {
			// The ACKs come back at the base round trip: no queue builds that could reveal the
			// bottleneck besides the probe's own delivery rate.
			return Sample{RTTMs: 20, AckRTTMs: testBaseMs, HaveAckRTT: true, Delivered: p.at(msAt(i)), NowMs: msAt(i), CeilingBound: bound}
		})
	}
	return ceilings
}

func TestProbe(t *testing.T) {
	const rate = 3000
	t.Run("the path keeps pace: the estimate grows and the probe goes on", func(t *testing.T) {
		c := withBottleneck(rate)
		ceilings := probeRun(t, &c, true, func(from uint32) fluid {
			return fluid{fromMs: float64(from), sendRate: rate * ProbeGain, deliverRate: rate * ProbeGain}
		})
		if want := []float64{rate * ProbeGain, rate * (2 - ProbeGain)}; !slices.Equal(ceilings[:2], want) {
			t.Fatalf("probe ceilings %v, want %v first", ceilings, want)
		}
		// The first probe found room for ProbeGain times the rate: the cruise runs there, and
		// the next probe asks for a quarter more again.
		if got, want := ceilings[2], rate*ProbeGain/CruiseGain*ProbeGain; math.Abs(got-want) > 20 {
			t.Errorf("second probe at %v B/s, want about %v", got, want)
		}
	})
	t.Run("the path paces a probe the peer filled: the estimate follows the path", func(t *testing.T) {
		c := withBottleneck(rate)
		probeRun(t, &c, true, func(from uint32) fluid {
			return fluid{fromMs: float64(from), sendRate: rate * ProbeGain, deliverRate: 2400}
		})
		if c.b.phase != phaseCruise || math.Abs(c.b.rate-2400) > 30 {
			t.Errorf("phase %d, bottleneck %v; want cruising at the path's 2400", c.b.phase, c.b.rate)
		}
	})
	t.Run("the path keeps pace with all the peer sends: no ceiling any more", func(t *testing.T) {
		// At 6000 B/s the probe's ceiling affords a frame every tick.
		c := withBottleneck(2 * rate)
		probeRun(t, &c, false, func(from uint32) fluid {
			return fluid{fromMs: float64(from), sendRate: 1.5 * rate, deliverRate: 1.5 * rate}
		})
		if c.b.phase != phaseNone || c.ByteRateCeiling() != 0 {
			t.Errorf("phase %d, ceiling %v; want none", c.b.phase, c.ByteRateCeiling())
		}
	})
	t.Run("sent every other tick, a peer that wants little every tick: no ceiling any more", func(t *testing.T) {
		c := withBottleneck(rate)
		if c.SendIntervalTicks() != 2 {
			t.Fatalf("interval %d, want 2", c.SendIntervalTicks())
		}
		probeRun(t, &c, false, func(from uint32) fluid {
			return fluid{fromMs: float64(from), sendRate: 1500, deliverRate: 1500}
		})
		if c.b.phase != phaseNone {
			t.Errorf("phase %d, want none: 1500 B/s every other tick is 3000 every tick, under the probe's %v", c.b.phase, rate*ProbeGain)
		}
	})
	t.Run("sent every other tick, a peer that would want more every tick: the estimate rises and the probe goes on", func(t *testing.T) {
		c := withBottleneck(rate)
		ceilings := probeRunN(t, &c, false, func(from uint32) fluid {
			return fluid{fromMs: float64(from), sendRate: 3300, deliverRate: 3300}
		}, 1)
		if c.b.phase != phaseProbeUp || math.Abs(c.b.rate-3300) > 40 {
			t.Errorf("phase %d, bottleneck %v after probing at %v; want a new probe from the 3300 delivered", c.b.phase, c.b.rate, ceilings)
		}
		if c.SendIntervalTicks() != 1 {
			t.Errorf("the new probe sends every %d ticks, want every tick", c.SendIntervalTicks())
		}
	})
	t.Run("sent every other tick, a peer that delivered no more than the estimate: no ceiling any more", func(t *testing.T) {
		// Whatever it would want every tick, nothing shows that the path carries more than the
		// estimate: only letting it go does.
		c := withBottleneck(rate)
		probeRunN(t, &c, false, func(from uint32) fluid {
			return fluid{fromMs: float64(from), sendRate: 2800, deliverRate: 2800}
		}, 1)
		if c.b.phase != phaseNone {
			t.Errorf("phase %d, bottleneck %v; want none", c.b.phase, c.b.rate)
		}
	})
	t.Run("a probe the peer did not fill proves nothing of a path that paced it", func(t *testing.T) {
		c := withBottleneck(rate)
		probeRun(t, &c, false, func(from uint32) fluid {
			return fluid{fromMs: float64(from), sendRate: 2000, deliverRate: 1200}
		})
		if c.b.phase != phaseCruise || c.b.rate != rate {
			t.Errorf("phase %d, bottleneck %v; want cruising at %d", c.b.phase, c.b.rate, rate)
		}
	})
}

func TestCeilingLevers(t *testing.T) {
	tests := []struct {
		name            string
		rate, demand    float64
		ph              phase
		throttle        float64
		ceiling         float64
		interval, frame int
	}{
		{"cruise over a frame a tick", 9000, 0, phaseCruise, 1, 8100, 1, 135},
		{"cruise under a frame a tick: two ticks a frame", 3000, 0, phaseCruise, 1, 2700, 2, 90},
		{"the throttle's longer interval keeps the frame", 3000, 0, phaseCruise, 0.2, 2700, 5, 90},
		{"drain", 3000, 0, phaseDrain, 1, 1500, 3, 75},
		{"probe", 3000, 0, phaseProbeUp, 1, 3750, 2, 125},
		{"after the probe", 3000, 0, phaseProbeDown, 1, 2250, 2, 75},
		{"never under a smallest frame each longest interval", 10, 0, phaseCruise, 1, 640, 6, 64},
		// A peer that wanted 10000 B/s: its frames under the ceiling keep about their size.
		{"half the demand: every other tick", 5000, 10000, phaseCruise, 1, 4500, 2, 150},
		{"demand under one and a half times the path: every tick", 5000, 7000, phaseCruise, 1, 4500, 1, 75},
		{"a third of the demand: still every other tick", 5000, 15000, phaseCruise, 1, 4500, 2, 150},
		{"a third of a thin path's demand: the smallest frame's interval", 1000, 3000, phaseCruise, 1, 900, 5, 75},
		{"the demand's interval in the drain", 5000, 10000, phaseDrain, 1, 2500, 2, 83},
		{"a probe every tick its frames allow", 5000, 10000, phaseProbeUp, 1, 6250, 1, 104},
		{"the demand's interval after the probe", 5000, 10000, phaseProbeDown, 1, 3750, 2, 125},
		{"the throttle's longer interval over the demand's", 5000, 10000, phaseCruise, 0.2, 4500, 5, 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := withBottleneck(tt.rate)
			c.b.demand, c.b.phase, c.throttle = tt.demand, tt.ph, tt.throttle
			if got := c.ByteRateCeiling(); math.Abs(got-tt.ceiling) > 1e-9 {
				t.Errorf("ceiling %v, want %v", got, tt.ceiling)
			}
			if got := c.SendIntervalTicks(); int(got) != tt.interval {
				t.Errorf("interval %d, want %d", got, tt.interval)
			}
			if got := c.FrameCeilingBytes(); got != tt.frame {
				t.Errorf("frame %d, want %d", got, tt.frame)
			}
		})
	}
	var c Controller
	c.Reset(triggerParams())
	if c.ByteRateCeiling() != 0 || c.FrameCeilingBytes() != 0 {
		t.Error("a ceiling without a bottleneck")
	}
	c = withBottleneck(3000)
	c.SetParams(Params{})
	if c.ByteRateCeiling() != 0 || c.FrameCeilingBytes() != 0 || c.SendIntervalTicks() != 1 {
		t.Error("disabling kept the ceiling")
	}
	c.SetParams(triggerParams())
	if c.ByteRateCeiling() != 0 {
		t.Error("re-enabling brought back a forgotten ceiling")
	}
}

// simLink is one peer in a simulation: the controller and loss estimator as a session drives
// them, frames sized as a session sizes them, a path with a FIFO bottleneck (capacity in bytes
// per second, 0 for none) and a 200 ms tail-drop queue, and a client that acknowledges every
// packet when it arrives. The path takes 10 ms each way besides the queue.
type simLink struct {
	demand   int // bytes of changes a frame gathers per tick
	c        Controller
	est      LossEstimator
	cl       protocol.AckState
	capacity float64
	freeMs   float64 // when the bottleneck has sent what it holds
	// loss drops each packet at random with this probability (in bursts of burst packets on
	// average, if burst > 1), using rng; policer, in bytes per second, drops what a token
	// bucket of policerBurst bytes has no tokens for.
	loss, burst           float64
	rng                   testRand
	bad                   bool
	policer, policerBurst float64
	tokens, policedMs     float64
	lost                  int
	seq                   uint16
	last                  uint64
	bound                 bool
	toClient              []simPacket
	toServer              []simPacket
	// sojourns are the bottleneck's queueing delays (own serialization included) of the packets
	// sent in the current window, delivered their bytes arrived at the client.
	sojourns  []float64
	delivered float64
	frames    int
}

type simPacket struct {
	atMs float64
	seq  uint16
	bits uint64
}

const (
	simMaxFrame = 480  // a frame carries at most this much of the changes
	simQueueMs  = 200  // the bottleneck's queue limit
	simOneWayMs = 10.0 // each way
)

// tick runs tick i of the simulation.
func (l *simLink) tick(i int) {
	now := float64(i) * 1000 / testHz
	for len(l.toClient) > 0 && l.toClient[0].atMs <= now {
		p := l.toClient[0]
		l.toClient = l.toClient[1:]
		l.cl.Receive(p.seq)
		l.toServer = append(l.toServer, simPacket{atMs: p.atMs + simOneWayMs, seq: l.cl.Latest, bits: l.cl.Received})
	}
	for len(l.toServer) > 0 && l.toServer[0].atMs <= now {
		a := l.toServer[0]
		l.toServer = l.toServer[1:]
		l.est.OnAckFieldAt(a.seq, a.bits, int64(a.atMs))
	}
	nowMs := int64(now)
	loss := l.est.Update(nowMs, 2*simOneWayMs)
	ack, haveAck := l.est.TakeAckRTT()
	l.c.Step(Sample{
		LossRatio: loss, RTTMs: 2 * simOneWayMs, AckRTTMs: ack, HaveAckRTT: haveAck,
		Delivered: l.est.Delivered(), NowMs: uint32(nowMs), CeilingBound: l.bound,
	})
	tick := uint64(i)
	if !l.c.ShouldSend(tick, l.last) {
		return
	}
	demand := min(l.demand*int(min(tick-l.last, simMaxFrame)), simMaxFrame)
	if l.last == NeverSent {
		demand = simMaxFrame
	}
	l.last = tick
	// The session's frame budget: the budget lever, what the byte rate affords a send, the
	// frame ceiling.
	budget := l.c.EffectiveBudget(2400)
	rate := 163840 * l.c.Throttle()
	if r := l.c.ByteRateCeiling(); r > 0 {
		rate = min(rate, r)
	}
	budget = min(budget, max(int(rate*float64(l.c.SendIntervalTicks())/testHz), 64))
	fc := l.c.FrameCeilingBytes()
	ceilingBudget := fc > 0 && fc <= budget
	if ceilingBudget {
		budget = fc
	}
	size := min(demand, budget)
	l.bound = ceilingBudget && demand > budget
	l.est.OnSent(l.seq, size, nowMs)
	if l.drop(now, size) {
		l.lost++
		l.seq++
		return
	}
	depart := now
	if l.capacity > 0 {
		depart = max(now, l.freeMs) + float64(size)*1000/l.capacity
		if depart-now > simQueueMs {
			l.seq++
			return // tail-dropped
		}
		l.freeMs = depart
	}
	l.sojourns = append(l.sojourns, depart-now)
	l.delivered += float64(size)
	l.frames++
	l.toClient = append(l.toClient, simPacket{atMs: depart + simOneWayMs, seq: l.seq})
	l.seq++
}

// drop reports whether the random loss or the policer drops a packet of size bytes sent at
// nowMs.
func (l *simLink) drop(nowMs float64, size int) bool {
	u := l.rng.float()
	lost := u < l.loss
	if l.burst > 1 { // a two-state Gilbert model whose bad state loses everything
		r := 1 / l.burst
		lost = l.bad
		if l.bad {
			l.bad = u >= r
		} else {
			l.bad = u < l.loss*r/(1-l.loss)
		}
	}
	if l.policer > 0 {
		l.tokens = min(l.policerBurst, l.tokens+(nowMs-l.policedMs)*l.policer/1000)
		l.policedMs = nowMs
		if !lost && l.tokens < float64(size) {
			return true
		}
		if !lost {
			l.tokens -= float64(size)
		}
	}
	return lost
}

// window runs the ticks [from, to) and returns the p95 of the sojourns of the packets sent in
// them and the bytes per second the bottleneck passed; l.frames counts the frames it passed.
func (l *simLink) window(from, to int) (p95, rate float64) {
	l.sojourns, l.delivered, l.frames = l.sojourns[:0], 0, 0
	for i := from; i < to; i++ {
		l.tick(i)
	}
	s := slices.Clone(l.sojourns)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	return s[len(s)*95/100], l.delivered * testHz / float64(to-from)
}

// A peer sent twice what its path carries: the bottleneck response keeps the queue it builds
// short and the path busy, sends the peer every other tick frames about the size it had, and
// lets it back to full rate when the path recovers.
func TestBottleneckEndToEnd(t *testing.T) {
	for _, demand := range []int{120, 160} {
		t.Run(fmt.Sprintf("%d B/s", demand*testHz), func(t *testing.T) {
			capacity := float64(demand * testHz / 2)
			l := simLink{demand: demand, last: NeverSent}
			l.c.Reset(MakeParams(defaultKnobs()))
			sec := func(s float64) int { return int(s * testHz) }
			if p95, rate := l.window(0, sec(4)); p95 != 0 || rate < 0.97*float64(demand*testHz) {
				t.Fatalf("healthy path: sojourn p95 %v ms, %v B/s", p95, rate)
			}
			l.capacity = capacity
			onsetP95, _ := l.window(sec(4), sec(5))
			p95, rate := l.window(sec(5), sec(12))
			hz := float64(l.frames) / 7
			t.Logf("capped at %.0f B/s: sojourn p95 %.0f ms in the first second, %.0f ms after; %.0f B/s through the bottleneck in %.1f frames/s",
				capacity, onsetP95, p95, rate, hz)
			// A frame of nearly the peer's demand per tick takes 28-30 ms to cross at the capacity.
			if p95 > 60 || rate < 0.8*CruiseGain*capacity {
				t.Errorf("capped path: sojourn p95 %.0f ms, %.0f B/s; want at most 60 ms and %.0f B/s", p95, rate, 0.8*CruiseGain*capacity)
			}
			if hz < 25 || hz > 40 {
				t.Errorf("capped path: %.1f frames/s, want about 30 (every other tick, with probes)", hz)
			}
			if onsetP95 >= simQueueMs {
				t.Errorf("the onset filled the queue: p95 %.0f ms", onsetP95)
			}
			l.capacity = 0
			l.window(sec(12), sec(15))
			if c := l.c.ByteRateCeiling(); c != 0 && c < float64(demand*testHz) || l.c.SendIntervalTicks() != 1 {
				t.Errorf("3 s after the path recovered: ceiling %v B/s, interval %d", c, l.c.SendIntervalTicks())
			}
			if _, rate := l.window(sec(15), sec(16)); rate < 0.97*float64(demand*testHz) {
				t.Errorf("recovered path: %v B/s", rate)
			}
		})
	}
}
