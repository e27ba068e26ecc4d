package congestion

import (
	"testing"
)

// pathRun drives a controller tick by tick over a path whose acknowledgement round trip at tick
// i is ack(i) (sampled every tick) and whose ENet RTT follows it as ENet smooths it (an eighth
// of the way to the path's round trip every 15 ticks, a ping every 250 ms at 60 Hz). It returns
// the throttle and signals after each evaluation.
type pathRun struct {
	c    Controller
	tick int
	rtt  float64
}

type evalResult struct {
	throttle float64
	signals  Signals
}

func newPathRun(p Params, baseMs float64) *pathRun {
	r := &pathRun{rtt: baseMs}
	r.c.Reset(p)
	return r
}

// evals runs n evaluation intervals of the path and returns what each evaluation left.
func (r *pathRun) evals(n int, ack func(i int) float64, loss float64) []evalResult {
	var out []evalResult
	for range n {
		for range r.c.Params().EvalIntervalTicks {
			a := ack(r.tick)
			if r.tick%15 == 0 {
				r.rtt += (a - r.rtt) / 8
			}
			r.c.Step(Sample{LossRatio: loss, RTTMs: uint32(r.rtt), AckRTTMs: uint32(a), HaveAckRTT: true, NowMs: msAt(r.tick)})
			r.tick++
		}
		out = append(out, evalResult{r.c.Throttle(), r.c.Signals()})
	}
	return out
}

func level(ms float64) func(int) float64 { return func(int) float64 { return ms } }

// A delay that steps up and stays level is a longer path: the evaluation that first sees it backs
// the peer off once, the next ones hold while the round trip shows it does not fall with the
// peer sent less, and after PathChangeEvals of them the baselines step up to it and the back-off
// is undone. ENet's smoothed RTT, which climbs for seconds after, reads as no delay meanwhile.
func TestPathChangeUndoesItsBackOff(t *testing.T) {
	p := MakeParams(defaultKnobs())
	r := newPathRun(p, 50)
	r.evals(10, level(50), 0)
	// A jitter of a few milliseconds, under a quarter of the 80 ms rise.
	step := func(i int) float64 { return 130 + float64(i%7) }
	got := r.evals(1+PathChangeEvals, step, 0)
	for i, e := range got[:PathChangeEvals] {
		if e.throttle != p.DecreaseFactor || e.signals != SignalDelay {
			t.Fatalf("evaluation %d after the step: throttle %v signals %q, want %v and delay (one back-off, then hold)", i, e.throttle, e.signals, p.DecreaseFactor)
		}
	}
	if e := got[PathChangeEvals]; e.throttle != 1 || e.signals != 0 {
		t.Fatalf("after %d level evaluations: throttle %v signals %q, want the back-off undone", PathChangeEvals, e.throttle, e.signals)
	}
	if b := r.c.AckBaselineRTTMs(); b != 130 {
		t.Errorf("acknowledgement baseline %d ms, want the level's 130", b)
	}
	// 30 s on the longer path: never delayed again, though ENet's RTT takes seconds to climb.
	for i, e := range r.evals(300, step, 0) {
		if e.throttle != 1 || e.signals != 0 {
			t.Fatalf("evaluation %d on the longer path: throttle %v signals %q", i, e.throttle, e.signals)
		}
	}
	if b := r.c.BaselineRTTMs(); b < 125 || b > 136 {
		t.Errorf("ENet's baseline %d ms after it caught up, want about the path's 130", b)
	}
}

// A delay that falls once the peer is sent less is its own queue draining, and one that grows
// although the peer was sent less is a queue growing: neither is a longer path. The peer stays
// backed off while the delay lasts, and the baselines hold.
func TestQueueIsNotAPathChange(t *testing.T) {
	p := MakeParams(defaultKnobs())
	for _, tt := range []struct {
		name string
		ack  func(evals int) float64 // the round trip, evaluations after the onset
	}{
		{"draining", func(n int) float64 { return max(200-25*float64(n), 95) }},
		{"growing", func(n int) float64 { return 130 + 25*float64(n) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newPathRun(p, 50)
			r.evals(10, level(50), 0)
			from := r.tick
			evalsSince := func(i int) int { return (i - from) / int(p.EvalIntervalTicks) }
			got := r.evals(6, func(i int) float64 { return tt.ack(evalsSince(i)) }, 0)
			prev := 1.0
			for i, e := range got {
				if e.signals != SignalDelay || e.throttle > prev {
					t.Fatalf("evaluation %d: throttle %v after %v, signals %q; want delay and no rise", i, e.throttle, prev, e.signals)
				}
				prev = e.throttle
			}
			if want := p.DecreaseFactor * p.DecreaseFactor * p.DecreaseFactor; prev > want {
				t.Errorf("throttle %v after 6 evaluations of a queue, want at most %v", prev, want)
			}
			if b := r.c.AckBaselineRTTMs(); b > 51 {
				t.Errorf("acknowledgement baseline %d ms, want it held at the path's 50", b)
			}
		})
	}
}

// Loss that comes with a delay not yet shown to be a longer path is congestion; once the delay is
// found to be the path, the same loss is not, and the back-offs the episode made are undone.
func TestLossDuringAPathChange(t *testing.T) {
	p := MakeParams(defaultKnobs())
	r := newPathRun(p, 50)
	r.evals(10, level(50), 0)
	got := r.evals(1+PathChangeEvals, level(130), 0.05)
	for i, e := range got[:PathChangeEvals] {
		if e.signals != SignalLoss|SignalDelay {
			t.Fatalf("evaluation %d: signals %q, want loss and delay", i, e.signals)
		}
	}
	if th := got[PathChangeEvals-1].throttle; th >= p.DecreaseFactor*p.DecreaseFactor {
		t.Fatalf("throttle %v after %d evaluations of loss with delay, want backed off each", th, PathChangeEvals)
	}
	if e := got[PathChangeEvals]; e.throttle != 1 || e.signals != 0 {
		t.Errorf("after the path change: throttle %v signals %q, want 1 and none", e.throttle, e.signals)
	}
}

// Delay that only ENet's RTT shows (no snapshot acknowledged) cannot be judged by its level; it
// is taken as a queue, as before the acknowledgements' round trip existed.
func TestENetOnlyDelayIsAQueue(t *testing.T) {
	p := triggerParams()
	var c Controller
	c.Reset(p)
	evalWith(&c, 50, Sample{RTTMs: 50})
	for i := range 8 {
		evalWith(&c, 130, Sample{RTTMs: 130})
		if c.Signals() != SignalDelay {
			t.Fatalf("evaluation %d: signals %q, want delay", i, c.Signals())
		}
	}
	if c.Throttle() != p.ThrottleFloor {
		t.Errorf("throttle %v, want the floor", c.Throttle())
	}
}
