package congestion

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// defaultKnobs are the netcode config defaults in config units.
func defaultKnobs() Knobs {
	return Knobs{
		Enabled:                true,
		TickRateHz:             60,
		MinSendHz:              10,
		LossThresholdPermille:  20,
		DelayMarginMs:          40,
		BacklogThresholdBytes:  32768,
		IncreaseStepPermille:   50,
		DecreaseFactorPermille: 700,
		EvalIntervalTicks:      6,
		BudgetFloorBytes:       400,
		LossCeilingPermille:    150,
		LossTestRatePermille:   800,
		LossRetestMs:           20000,
	}
}

// testRand is a deterministic xorshift64 for test inputs.
type testRand uint64

func (r *testRand) next() uint64 {
	x := uint64(*r)
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = testRand(x)
	return x
}

// float returns a uniform float in [0, 1).
func (r *testRand) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// intn returns a uniform int in [lo, hi].
func (r *testRand) intn(lo, hi int) int { return lo + int(r.next()%uint64(hi-lo+1)) }

func TestMakeParams(t *testing.T) {
	withKnobs := func(f func(*Knobs)) Knobs {
		k := defaultKnobs()
		f(&k)
		return k
	}
	tests := []struct {
		name  string
		knobs Knobs
		want  Params
	}{
		{
			name:  "defaults",
			knobs: defaultKnobs(),
			want: Params{
				Enabled: true, ThrottleFloor: 10.0 / 60, MaxIntervalTicks: 6, LossThreshold: 0.02,
				DelayMarginMs: 40, BacklogThresholdBytes: 32768, IncreaseStep: 0.05, DecreaseFactor: 0.7,
				EvalIntervalTicks: 6, BudgetFloorBytes: 400, BaselineDriftUsPerTick: 167, BaselineHoldTicks: 300,
				TickRateHz: 60, MinFrameBytes: DefaultMinFrameBytes, LossCeiling: 0.15, LossTestGain: 0.8, LossRetestTicks: 1200,
			},
		},
		{
			name:  "min send rate not dividing the tick rate rounds the interval up",
			knobs: withKnobs(func(k *Knobs) { k.MinSendHz = 7 }),
			want: Params{
				Enabled: true, ThrottleFloor: 7.0 / 60, MaxIntervalTicks: 9, LossThreshold: 0.02,
				DelayMarginMs: 40, BacklogThresholdBytes: 32768, IncreaseStep: 0.05, DecreaseFactor: 0.7,
				EvalIntervalTicks: 6, BudgetFloorBytes: 400, BaselineDriftUsPerTick: 167, BaselineHoldTicks: 300,
				TickRateHz: 60, MinFrameBytes: DefaultMinFrameBytes, LossCeiling: 0.15, LossTestGain: 0.8, LossRetestTicks: 1200,
			},
		},
		{
			name:  "10 Hz server with min send equal to the tick rate never decimates",
			knobs: withKnobs(func(k *Knobs) { k.TickRateHz, k.MinSendHz, k.Enabled = 10, 10, false }),
			want: Params{
				ThrottleFloor: 1, MaxIntervalTicks: 1, LossThreshold: 0.02,
				DelayMarginMs: 40, BacklogThresholdBytes: 32768, IncreaseStep: 0.05, DecreaseFactor: 0.7,
				EvalIntervalTicks: 6, BudgetFloorBytes: 400, BaselineDriftUsPerTick: 1000, BaselineHoldTicks: 50,
				TickRateHz: 10, MinFrameBytes: DefaultMinFrameBytes, LossCeiling: 0.15, LossTestGain: 0.8, LossRetestTicks: 200,
			},
		},
		{
			name:  "min send above the tick rate is clamped to it",
			knobs: withKnobs(func(k *Knobs) { k.TickRateHz, k.MinSendHz = 30, 120 }),
			want: Params{
				Enabled: true, ThrottleFloor: 1, MaxIntervalTicks: 1, LossThreshold: 0.02,
				DelayMarginMs: 40, BacklogThresholdBytes: 32768, IncreaseStep: 0.05, DecreaseFactor: 0.7,
				EvalIntervalTicks: 6, BudgetFloorBytes: 400, BaselineDriftUsPerTick: 333, BaselineHoldTicks: 150,
				TickRateHz: 30, MinFrameBytes: DefaultMinFrameBytes, LossCeiling: 0.15, LossTestGain: 0.8, LossRetestTicks: 600,
			},
		},
		{
			name:  "zero knobs clamp to the safe lower bounds",
			knobs: Knobs{},
			want: Params{
				ThrottleFloor: 1, MaxIntervalTicks: 1, IncreaseStep: 0.001, DecreaseFactor: 0.001,
				EvalIntervalTicks: 1, BaselineDriftUsPerTick: 10000, BaselineHoldTicks: 5, TickRateHz: 1,
				MinFrameBytes: DefaultMinFrameBytes, LossTestGain: 0.001, LossRetestTicks: 1,
			},
		},
		{
			name: "negative knobs clamp to the safe lower bounds",
			knobs: Knobs{
				Enabled: true, TickRateHz: -60, MinSendHz: -1, LossThresholdPermille: -5, DelayMarginMs: -1,
				BacklogThresholdBytes: -1, IncreaseStepPermille: -1, DecreaseFactorPermille: -1,
				EvalIntervalTicks: -1, BudgetFloorBytes: -400, MinFrameBytes: -64, LossCeilingPermille: -1,
				LossTestRatePermille: -1, LossRetestMs: -1,
			},
			want: Params{
				Enabled: true, ThrottleFloor: 1, MaxIntervalTicks: 1, IncreaseStep: 0.001,
				DecreaseFactor: 0.001, EvalIntervalTicks: 1, BaselineDriftUsPerTick: 10000, BaselineHoldTicks: 5,
				TickRateHz: 1, MinFrameBytes: 1, LossTestGain: 0.001, LossRetestTicks: 1,
			},
		},
		{
			name: "huge knobs clamp to the safe upper bounds",
			knobs: Knobs{
				Enabled: true, TickRateHz: math.MaxInt, MinSendHz: 1, LossThresholdPermille: math.MaxInt,
				DelayMarginMs: math.MaxInt, BacklogThresholdBytes: math.MaxInt, IncreaseStepPermille: math.MaxInt,
				DecreaseFactorPermille: math.MaxInt, EvalIntervalTicks: math.MaxInt, BudgetFloorBytes: math.MaxInt,
				MinFrameBytes: math.MaxInt, LossCeilingPermille: math.MaxInt, LossTestRatePermille: math.MaxInt,
				LossRetestMs: math.MaxInt,
			},
			want: Params{
				Enabled: true, ThrottleFloor: MinThrottleFloor, MaxIntervalTicks: MaxTickRateHz, LossThreshold: 1,
				DelayMarginMs: math.MaxUint32, BacklogThresholdBytes: math.MaxUint32, IncreaseStep: 1,
				DecreaseFactor: 0.999, EvalIntervalTicks: math.MaxUint32, BudgetFloorBytes: math.MaxInt,
				BaselineDriftUsPerTick: 10, BaselineHoldTicks: 5000, TickRateHz: MaxTickRateHz,
				MinFrameBytes: math.MaxInt32, LossCeiling: 1, LossTestGain: 0.999, LossRetestTicks: math.MaxInt32,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MakeParams(tt.knobs); got != tt.want {
				t.Errorf("MakeParams(%+v)\n got %+v\nwant %+v", tt.knobs, got, tt.want)
			}
		})
	}
}

// triggerParams are the defaults without baseline drift, so the delay trigger is exact.
func triggerParams() Params {
	p := MakeParams(defaultKnobs())
	p.BaselineDriftUsPerTick = 0
	return p
}

// evalWith steps c through one eval interval of healthy ticks at rttMs, with s on the eval tick.
func evalWith(c *Controller, healthyRTTMs uint32, s Sample) {
	for range c.Params().EvalIntervalTicks - 1 {
		c.Step(Sample{RTTMs: healthyRTTMs})
	}
	c.Step(s)
}

// heavyLoss is a delivery count whose 100 judged packets were 40% lost: over the default 15%
// loss ceiling.
var heavyLoss = Delivery{Judged: 100, Lost: 40, LossRuns: 30}

// TestTriggers: what one evaluation finds congested. Loss alone, however high its ratio, is not
// congestion; it is with a queue (here ENet's RTT over the margin), or when the judged packets
// behind it are over the ceiling.
func TestTriggers(t *testing.T) {
	p := triggerParams()
	const base = 50
	tests := []struct {
		name   string
		sample Sample
		by     Signals // none: healthy
	}{
		{"healthy", Sample{LossRatio: 0.01, RTTMs: base + 10, ReliableBytesInFlight: 1000}, 0},
		{"all zero (no link stats)", Sample{}, 0},
		{"loss above threshold, no queue", Sample{LossRatio: 0.0201, RTTMs: base}, 0},
		{"loss total, nothing judged", Sample{LossRatio: 1}, 0},
		{"loss over the ceiling", Sample{LossRatio: 0.4, RTTMs: base, Delivered: heavyLoss}, SignalLoss},
		{"loss under the ceiling", Sample{LossRatio: 0.14, RTTMs: base, Delivered: Delivery{Judged: 100, Lost: 14, LossRuns: 14}}, 0},
		{"loss over the ceiling, too few judged", Sample{LossRatio: 1, RTTMs: base, Delivered: Delivery{Judged: 20, Lost: 20, LossRuns: 1}}, 0},
		{"delay over margin", Sample{RTTMs: base + 41}, SignalDelay},
		{"delay at margin", Sample{RTTMs: base + 40}, 0},
		{"rtt below baseline", Sample{RTTMs: base - 30}, 0},
		{"backlog above threshold", Sample{RTTMs: base, ReliableBytesInFlight: 32769}, SignalBacklog},
		{"backlog at threshold", Sample{RTTMs: base, ReliableBytesInFlight: 32768}, 0},
		{"loss with delay", Sample{LossRatio: 0.0201, RTTMs: base + 41}, SignalLoss | SignalDelay},
		{"loss with backlog", Sample{LossRatio: 0.0201, RTTMs: base, ReliableBytesInFlight: 32769}, SignalLoss | SignalBacklog},
		{"loss, delay and backlog", Sample{LossRatio: 0.5, RTTMs: base + 100, ReliableBytesInFlight: 1 << 20}, SignalLoss | SignalDelay | SignalBacklog},
		{"unknown rtt never triggers delay", Sample{RTTMs: 0, LossRatio: 0.01}, 0},
		{"NaN loss is no evidence", Sample{LossRatio: math.NaN(), RTTMs: base + 41}, SignalDelay},
		{"Inf loss with delay", Sample{LossRatio: math.Inf(1), RTTMs: base + 41}, SignalLoss | SignalDelay},
		{"negative loss is healthy", Sample{LossRatio: -1, RTTMs: base}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Controller
			c.Reset(p)
			evalWith(&c, base, Sample{RTTMs: base}) // establish the baseline, stay at 1
			if c.Throttle() != 1 || c.BaselineRTTMs() != base {
				t.Fatalf("setup: throttle %v baseline %d", c.Throttle(), c.BaselineRTTMs())
			}
			evalWith(&c, base, tt.sample)
			congested, want := tt.by != 0, 1.0
			if congested {
				want = p.DecreaseFactor
			}
			if c.Congested() != congested || c.Throttle() != want || c.Signals() != tt.by {
				t.Errorf("congested %v by %q throttle %v, want %v by %q %v", c.Congested(), c.Signals(), c.Throttle(), congested, tt.by, want)
			}
		})
	}
}

// TestSignalsString: the names the admin API reports, joined in a fixed order.
func TestSignalsString(t *testing.T) {
	for _, tt := range []struct {
		s    Signals
		want string
	}{
		{0, ""},
		{SignalLoss, "loss"},
		{SignalDelay, "delay"},
		{SignalBacklog, "backlog"},
		{SignalBacklog | SignalLoss, "loss+backlog"},
		{SignalLoss | SignalDelay | SignalBacklog, "loss+delay+backlog"},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Signals(%d).String() = %q, want %q", tt.s, got, tt.want)
		}
	}
	// A disabled controller reports none, as it reports no congestion.
	var c Controller
	c.Reset(triggerParams())
	evalWith(&c, 50, Sample{LossRatio: 1, RTTMs: 50, Delivered: heavyLoss})
	if c.Signals() != SignalLoss {
		t.Fatalf("signals %q after a lossy evaluation", c.Signals())
	}
	p := triggerParams()
	p.Enabled = false
	c.SetParams(p)
	if c.Signals() != 0 || c.Congested() {
		t.Errorf("disabled: signals %q congested %v, want none", c.Signals(), c.Congested())
	}
}

func TestDelayTriggerWithoutBaseline(t *testing.T) {
	var c Controller
	c.Reset(triggerParams())
	// The first RTT ever seen becomes the baseline, so it cannot itself read as a rise.
	evalWith(&c, 0, Sample{RTTMs: 5000})
	if c.Congested() || c.Throttle() != 1 || c.BaselineRTTMs() != 5000 {
		t.Errorf("congested %v throttle %v baseline %d", c.Congested(), c.Throttle(), c.BaselineRTTMs())
	}
}

func TestHysteresis(t *testing.T) {
	var c Controller
	c.Reset(triggerParams())
	backlogged := Sample{RTTMs: 50, ReliableBytesInFlight: 1 << 20}
	healthy := Sample{RTTMs: 50}

	// Congested ticks before the eval boundary do not move the throttle.
	for i := range 5 {
		c.Step(backlogged)
		if c.Throttle() != 1 || c.Congested() {
			t.Fatalf("tick %d: throttle %v congested %v before the first eval", i+1, c.Throttle(), c.Congested())
		}
	}
	c.Step(backlogged)
	if c.Throttle() != 0.7 || !c.Congested() {
		t.Fatalf("eval 1: throttle %v congested %v, want 0.7 true", c.Throttle(), c.Congested())
	}
	// Healthy ticks between boundaries hold the throttle and the classification.
	for i := range 5 {
		c.Step(healthy)
		if c.Throttle() != 0.7 || !c.Congested() {
			t.Fatalf("tick %d after eval 1: throttle %v congested %v, want held", i+1, c.Throttle(), c.Congested())
		}
	}
	c.Step(healthy)
	dec, step := c.Params().DecreaseFactor, c.Params().IncreaseStep // runtime float arithmetic
	if got, want := c.Throttle(), dec+step; got != want || c.Congested() {
		t.Fatalf("eval 2: throttle %v congested %v, want %v false", got, c.Congested(), want)
	}
	// Only the eval tick's sample is classified: congestion that cleared by then is not acted on.
	for range 5 {
		c.Step(backlogged)
	}
	c.Step(healthy)
	if got, want := c.Throttle(), dec+step+step; got != want {
		t.Fatalf("eval 3: throttle %v, want %v", got, want)
	}
}

func TestFloorReachedAndNeverCrossed(t *testing.T) {
	var c Controller
	p := triggerParams()
	c.Reset(p)
	backlogged := Sample{RTTMs: 50, ReliableBytesInFlight: 1 << 20}
	// 0.7^5 = 0.168 is still above 1/6; the sixth back-off lands exactly on the floor.
	w := 1.0
	for eval := 1; eval <= 6; eval++ {
		w *= p.DecreaseFactor
		if eval == 6 {
			w = p.ThrottleFloor
		}
		evalWith(&c, 50, backlogged)
		if c.Throttle() != w {
			t.Fatalf("eval %d: throttle %v, want %v", eval, c.Throttle(), w)
		}
	}
	for i := range 10000 {
		c.Step(backlogged)
		if c.Throttle() != p.ThrottleFloor {
			t.Fatalf("tick %d at the floor: throttle %v, want exactly %v", i, c.Throttle(), p.ThrottleFloor)
		}
		if c.SendIntervalTicks() != p.MaxIntervalTicks {
			t.Fatalf("tick %d at the floor: interval %d, want %d", i, c.SendIntervalTicks(), p.MaxIntervalTicks)
		}
	}
}

func TestAdditiveRecoveryToExactlyOne(t *testing.T) {
	var c Controller
	p := triggerParams()
	c.Reset(p)
	for range 20 {
		evalWith(&c, 50, Sample{RTTMs: 50, ReliableBytesInFlight: 1 << 20})
	}
	if c.Throttle() != p.ThrottleFloor {
		t.Fatalf("throttle %v, want the floor", c.Throttle())
	}
	prev := c.Throttle()
	evals := 0
	for c.Throttle() < 1 {
		evalWith(&c, 50, Sample{RTTMs: 50})
		evals++
		if got := c.Throttle(); got <= prev || got > 1 {
			t.Fatalf("eval %d: throttle %v after %v, want a rise to at most 1", evals, got, prev)
		}
		prev = c.Throttle()
	}
	// From 1/6 at +0.05 per eval: ceil((1 - 1/6) / 0.05) = 17 evals.
	if evals != 17 {
		t.Errorf("recovered in %d evals, want 17", evals)
	}
	for range 1000 {
		c.Step(Sample{RTTMs: 50})
		if c.Throttle() != 1 || c.SendIntervalTicks() != 1 || c.EffectiveBudget(2400) != 2400 {
			t.Fatalf("after recovery: throttle %v interval %d budget %d", c.Throttle(), c.SendIntervalTicks(), c.EffectiveBudget(2400))
		}
	}
}

func TestSendIntervalTicks(t *testing.T) {
	tests := []struct {
		throttle    float64
		maxInterval uint32
		want        uint32
	}{
		{1, 6, 1},
		{0.99, 6, 2},
		{0.7, 6, 2},
		{0.5, 6, 2},
		{0.49, 6, 3},
		{1.0 / 3, 6, 3},
		{0.33333333333333337, 6, 3},
		{0.3333333333333333, 6, 3},
		{0.25, 6, 4},
		{0.2, 6, 5},
		{10.0 / 60, 6, 6},
		{0.1, 6, 6}, // clamped to MaxIntervalTicks
		{0.1, 100, 10},
		{MinThrottleFloor, 1000, 1000},
		{MinThrottleFloor, math.MaxUint32, 1000},
		{MinThrottleFloor, 1, 1},
	}
	for _, tt := range tests {
		c := Controller{p: Params{Enabled: true, ThrottleFloor: MinThrottleFloor, MaxIntervalTicks: tt.maxInterval}, throttle: tt.throttle}
		if got := c.SendIntervalTicks(); got != tt.want {
			t.Errorf("throttle %v max %d: interval %d, want %d", tt.throttle, tt.maxInterval, got, tt.want)
		}
	}
}

func TestEffectiveBudget(t *testing.T) {
	tests := []struct {
		name     string
		static   int
		throttle float64
		floor    int
		want     int
	}{
		{"unlimited passes through", 0, 0.5, 400, 0},
		{"unlimited passes through at the floor", 0, MinThrottleFloor, 400, 0},
		{"negative passes through", -1, 0.5, 400, -1},
		{"full throttle is static", 2400, 1, 400, 2400},
		{"halved", 2400, 0.5, 400, 1200},
		{"scaled to exactly the floor", 2400, 1.0 / 6, 400, 400},
		{"floor holds", 2400, 0.1, 400, 400},
		{"below floor is never raised", 300, 0.5, 400, 300},
		{"at floor stays", 400, 0.1, 400, 400},
		{"zero floor scales freely", 2400, 0.1, 0, 240},
		{"rounds half away from zero", 5, 0.5, 0, 3},
		{"rounds down", 7, 0.3, 0, 2},
		{"rounds up", 7, 0.5, 0, 4},
		{"tiny budget can scale to zero", 1, 0.4, 0, 0},
		{"max int halves", math.MaxInt, 0.5, 400, 1 << 62},
		{"rounds up to static", 3, 0.9, 0, 3},
		{"max int just below 1 never overflows", math.MaxInt, math.Nextafter(1, 0), 400, math.MaxInt - 1023},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Controller{p: Params{Enabled: true, ThrottleFloor: MinThrottleFloor, MaxIntervalTicks: 1000, BudgetFloorBytes: tt.floor}, throttle: tt.throttle}
			if got := c.EffectiveBudget(tt.static); got != tt.want {
				t.Errorf("EffectiveBudget(%d) at throttle %v floor %d = %d, want %d", tt.static, tt.throttle, tt.floor, got, tt.want)
			}
		})
	}
}

func TestShouldSend(t *testing.T) {
	tests := []struct {
		name           string
		throttle       float64
		tick, lastSent uint64
		want           bool
	}{
		{"first send at tick 0", 1, 0, NeverSent, true},
		{"first send decimated", 0.2, 0, NeverSent, true},
		{"first send later", 0.2, 12345, NeverSent, true},
		{"every tick", 1, 5, 4, true},
		{"not twice in one tick", 1, 5, 5, false},
		{"not twice in one tick decimated", 0.2, 5, 5, false},
		{"interval 5 too early", 0.2, 9, 5, false},
		{"interval 5 due", 0.2, 10, 5, true},
		{"interval 5 overdue", 0.2, 100, 5, true},
		{"last sent ahead of tick", 0.2, 3, 7, true},
		{"tick 0 sent at tick 0", 0.2, 0, 0, false},
		{"huge ticks", 0.2, math.MaxUint64 - 1, math.MaxUint64 - 6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Controller{p: Params{Enabled: true, ThrottleFloor: 0.1, MaxIntervalTicks: 10}, throttle: tt.throttle}
			if got := c.ShouldSend(tt.tick, tt.lastSent); got != tt.want {
				t.Errorf("ShouldSend(%d, %d) at interval %d = %v, want %v", tt.tick, tt.lastSent, c.SendIntervalTicks(), got, tt.want)
			}
		})
	}
}

func TestRateLeverCadence(t *testing.T) {
	// Driven the way the broadcaster drives it, a peer at interval n is sent exactly every n ticks.
	for _, throttle := range []float64{1, 0.7, 0.34, 0.25, 1.0 / 6} {
		c := Controller{p: Params{Enabled: true, ThrottleFloor: 1.0 / 6, MaxIntervalTicks: 6}, throttle: throttle}
		n := uint64(c.SendIntervalTicks())
		last := uint64(NeverSent)
		sends := 0
		for tick := range uint64(600) {
			if c.ShouldSend(tick, last) {
				if last != NeverSent && tick-last != n {
					t.Fatalf("throttle %v: sent at %d after %d, want gap %d", throttle, tick, last, n)
				}
				last = tick
				sends++
			}
		}
		if want := int(600 / n); sends != want {
			t.Errorf("throttle %v: %d sends in 600 ticks, want %d", throttle, sends, want)
		}
	}
}

func TestBaselineDrift(t *testing.T) {
	tests := []struct {
		tickHz int
		drift  uint32 // µs per tick
	}{
		{10, 1000},
		{60, 167},
		{120, 83},
		{1000, 10},
	}
	for _, tt := range tests {
		k := defaultKnobs()
		k.TickRateHz = tt.tickHz
		k.MinSendHz = min(10, tt.tickHz)
		p := MakeParams(k)
		if p.BaselineDriftUsPerTick != tt.drift {
			t.Fatalf("%d Hz: drift %d µs/tick, want %d", tt.tickHz, p.BaselineDriftUsPerTick, tt.drift)
		}
		if want := uint32(tt.tickHz * BaselineHoldMs / 1000); p.BaselineHoldTicks != want {
			t.Fatalf("%d Hz: hold %d ticks, want %d", tt.tickHz, p.BaselineHoldTicks, want)
		}
		p.BaselineHoldTicks = 0 // the drift alone (TestBaselineHold has the hold)
		var c Controller
		c.Reset(p)
		c.Step(Sample{RTTMs: 50})
		// One second at a higher RTT lifts the baseline by BaselineDriftMsPerSecond (to rounding).
		for range tt.tickHz {
			c.Step(Sample{RTTMs: 500})
		}
		wantUs := 50000 + uint64(tt.tickHz)*uint64(tt.drift)
		if c.d.baseline.us != wantUs {
			t.Errorf("%d Hz: baseline %d µs after 1 s, want %d", tt.tickHz, c.d.baseline.us, wantUs)
		}
		if rise := float64(wantUs-50000) / 1000; math.Abs(rise-BaselineDriftMsPerSecond) > 0.1 {
			t.Errorf("%d Hz: baseline rose %.3f ms in 1 s, want %d", tt.tickHz, rise, BaselineDriftMsPerSecond)
		}
		// A fall is followed at once.
		c.Step(Sample{RTTMs: 20})
		if c.BaselineRTTMs() != 20 {
			t.Errorf("%d Hz: baseline %d after a fall to 20 ms", tt.tickHz, c.BaselineRTTMs())
		}
	}
}

func TestBaselineTracksPathChange(t *testing.T) {
	// A re-route from 50 to 150 ms, with no loss, reads as congestion for the baseline hold after
	// the first evaluation that sees it, and then until the baseline has drifted to within the
	// margin: (150 - 40 - 50) ms at 167 µs per tick = 360 ticks of drift.
	p := MakeParams(defaultKnobs())
	var c Controller
	c.Reset(p)
	for range 60 {
		c.Step(Sample{RTTMs: 50})
	}
	lastCongested := -1
	for tick := 1; tick <= 1200; tick++ {
		c.Step(Sample{RTTMs: 150})
		if c.Congested() {
			lastCongested = tick
		}
	}
	// Evals fall on multiples of 6. The baseline drifts on ticks 1 to 6; the evaluation of tick 6
	// sees the rise and holds the baseline for the next 300 ticks (7 to 306); it drifts again from
	// tick 307. At 654 it has drifted 6 + 348 ticks, 50000 + 354*167 = 109118 µs, 40.9 ms under
	// the RTT: congested. At 660 it is 110020 µs: healthy. Congested() holds in between.
	if lastCongested != 659 {
		t.Errorf("last congested tick %d, want 659", lastCongested)
	}
	if c.Throttle() != 1 {
		t.Errorf("throttle %v after the baseline caught up, want recovery to 1", c.Throttle())
	}
	// A queue that builds for one second is not absorbed: the baseline drifts only until the
	// first evaluation sees the rise (5 ticks, 0.8 ms).
	c.Reset(p)
	c.Step(Sample{RTTMs: 50})
	for range 60 {
		c.Step(Sample{RTTMs: 200})
	}
	if b := c.BaselineRTTMs(); b != 50 {
		t.Errorf("baseline %d ms after 1 s of queueing, want 50", b)
	}
	if !c.Congested() || c.Throttle() != p.ThrottleFloor {
		t.Errorf("1 s of queueing: congested %v throttle %v, want the floor", c.Congested(), c.Throttle())
	}
}

func TestSetParamsMidRun(t *testing.T) {
	base := triggerParams()
	congest := func(c *Controller, evals int) {
		for range evals {
			evalWith(c, 50, Sample{RTTMs: 50, ReliableBytesInFlight: 1 << 20})
		}
	}
	t.Run("higher floor clamps the throttle up", func(t *testing.T) {
		var c Controller
		c.Reset(base)
		congest(&c, 2) // 0.49
		p := base
		p.ThrottleFloor, p.MaxIntervalTicks = 0.5, 2
		c.SetParams(p)
		if c.Throttle() != 0.5 || c.SendIntervalTicks() != 2 {
			t.Errorf("throttle %v interval %d, want 0.5 2", c.Throttle(), c.SendIntervalTicks())
		}
	})
	t.Run("lower floor keeps the throttle", func(t *testing.T) {
		var c Controller
		c.Reset(base)
		congest(&c, 2)
		p := base
		p.ThrottleFloor, p.MaxIntervalTicks = 0.1, 10
		c.SetParams(p)
		if want := base.DecreaseFactor * base.DecreaseFactor; c.Throttle() != want || c.BaselineRTTMs() != 50 {
			t.Errorf("throttle %v baseline %d, want 0.49 50", c.Throttle(), c.BaselineRTTMs())
		}
		congest(&c, 10)
		if c.Throttle() != 0.1 {
			t.Errorf("throttle %v, want the new floor 0.1", c.Throttle())
		}
	})
	t.Run("disabling pins to 1 and re-enabling starts from 1", func(t *testing.T) {
		var c Controller
		c.Reset(base)
		congest(&c, 3)
		p := base
		p.Enabled = false
		c.SetParams(p)
		if c.Throttle() != 1 || c.Congested() || c.SendIntervalTicks() != 1 || c.EffectiveBudget(2400) != 2400 {
			t.Fatalf("disabled: throttle %v congested %v", c.Throttle(), c.Congested())
		}
		for range 100 {
			c.Step(Sample{LossRatio: 1, RTTMs: 900, ReliableBytesInFlight: math.MaxUint32})
		}
		if c.Throttle() != 1 || c.Congested() {
			t.Fatalf("disabled under congestion: throttle %v congested %v", c.Throttle(), c.Congested())
		}
		c.SetParams(base)
		if c.Throttle() != 1 {
			t.Fatalf("re-enabled: throttle %v, want 1", c.Throttle())
		}
		congest(&c, 1)
		if c.Throttle() != 0.7 {
			t.Errorf("re-enabled then congested: throttle %v, want 0.7", c.Throttle())
		}
	})
	t.Run("shorter eval interval evaluates on the next tick", func(t *testing.T) {
		var c Controller
		c.Reset(base)
		for range 4 {
			c.Step(Sample{ReliableBytesInFlight: 1 << 20})
		}
		p := base
		p.EvalIntervalTicks = 2
		c.SetParams(p)
		c.Step(Sample{ReliableBytesInFlight: 1 << 20})
		if c.Throttle() != 0.7 {
			t.Errorf("throttle %v, want an eval on the first tick past the new interval", c.Throttle())
		}
	})
	t.Run("enabling a zero controller starts from 1", func(t *testing.T) {
		var c Controller
		c.SetParams(base)
		if c.Throttle() != 1 {
			t.Errorf("throttle %v, want 1", c.Throttle())
		}
	})
}

// schedule drives a controller the way the broadcaster does for ticks ticks and returns the bytes
// of what it would send: per tick, whether the peer is sent and each static budget's effective
// size. samples supplies tick i's link signals.
func schedule(c *Controller, ticks int, samples func(i int) Sample) []byte {
	statics := []int{0, 1, 63, 64, 399, 400, 401, 1200, 2400, 65535, math.MaxInt}
	out := make([]byte, 0, ticks*8*(len(statics)+2))
	last := uint64(NeverSent)
	for i := range ticks {
		c.Step(samples(i))
		tick := uint64(i)
		if !c.ShouldSend(tick, last) {
			continue
		}
		last = tick
		out = binary.LittleEndian.AppendUint64(out, tick)
		for _, s := range statics {
			out = binary.LittleEndian.AppendUint64(out, uint64(c.EffectiveBudget(s)))
		}
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(c.Throttle()))
	}
	return out
}

func TestHealthyEqualsDisabledEqualsNoController(t *testing.T) {
	const ticks = 100000 // about 28 minutes at 60 Hz
	enabled := MakeParams(defaultKnobs())
	disabledKnobs := defaultKnobs()
	disabledKnobs.Enabled = false
	disabled := MakeParams(disabledKnobs)

	// The reference: no controller, a send every tick at the static budgets, throttle 1.
	var none Controller
	want := schedule(&none, ticks, func(int) Sample { return Sample{} })

	rng := testRand(0x9e3779b97f4a7c15)
	var delivered Delivery
	healthy := func(i int) Sample {
		// Loss at or under the threshold, RTTs within the margin of their minimum, backlog at
		// most the threshold, a path delivering at the pace it is sent to, judged packets
		// rarely lost: never congested, never tested.
		now := uint32(i * 1000 / 60)
		delivered.Bytes += uint64(rng.intn(0, 1200))
		delivered.AtMs, delivered.SentMs = now-uint32(rng.intn(0, 5)), now-uint32(rng.intn(30, 60))
		// About one packet judged a tick, one in a hundred of them lost.
		delivered.Judged += uint64(rng.intn(0, 2))
		if rng.intn(0, 199) == 0 {
			delivered.Judged++
			delivered.Lost++
			delivered.LossRuns++
		}
		delivered.JudgedSentMs = now - 80
		return Sample{
			LossRatio:             enabled.LossThreshold * rng.float(),
			RTTMs:                 uint32(rng.intn(50, 90)),
			ReliableBytesInFlight: uint32(rng.intn(0, int(enabled.BacklogThresholdBytes))),
			AckRTTMs:              uint32(rng.intn(30, 70)),
			HaveAckRTT:            i%3 == 0,
			Delivered:             delivered,
			NowMs:                 now,
		}
	}
	congested := func(i int) Sample {
		return Sample{LossRatio: 1, RTTMs: uint32(50 + i%1000), ReliableBytesInFlight: math.MaxUint32}
	}
	tests := []struct {
		name    string
		params  *Params
		samples func(int) Sample
	}{
		{"enabled, healthy link", &enabled, healthy},
		{"enabled, no link stats", &enabled, func(int) Sample { return Sample{} }},
		{"disabled, congested link", &disabled, congested},
		{"disabled, healthy link", &disabled, healthy},
		{"zero controller, congested link", nil, congested},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Controller
			if tt.params != nil {
				c.Reset(*tt.params)
			}
			got := schedule(&c, ticks, tt.samples)
			if !bytes.Equal(got, want) {
				t.Fatalf("schedule differs from no controller (%d vs %d bytes)", len(got), len(want))
			}
			if c.Congested() {
				t.Errorf("congested at the end")
			}
		})
	}
}

func TestExtremeInputs(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	params := []Params{
		{},
		{Enabled: true},
		{Enabled: true, ThrottleFloor: nan, LossThreshold: nan, IncreaseStep: nan, DecreaseFactor: nan},
		{Enabled: true, ThrottleFloor: inf, LossThreshold: inf, IncreaseStep: inf, DecreaseFactor: inf, MaxIntervalTicks: math.MaxUint32},
		{Enabled: true, ThrottleFloor: -inf, LossThreshold: -inf, IncreaseStep: -inf, DecreaseFactor: -inf, BudgetFloorBytes: math.MinInt},
		{Enabled: true, ThrottleFloor: 1e-300, IncreaseStep: 1e-300, DecreaseFactor: 1e-300, MaxIntervalTicks: math.MaxUint32, BaselineDriftUsPerTick: math.MaxUint32, DelayMarginMs: math.MaxUint32},
		{Enabled: true, ThrottleFloor: 2, IncreaseStep: 5, DecreaseFactor: 5, EvalIntervalTicks: 1, BudgetFloorBytes: math.MaxInt},
		MakeParams(defaultKnobs()),
	}
	samples := []Sample{
		{},
		{LossRatio: nan},
		{LossRatio: inf},
		{LossRatio: -inf},
		{LossRatio: math.MaxFloat64, RTTMs: math.MaxUint32, ReliableBytesInFlight: math.MaxUint32},
		{LossRatio: math.SmallestNonzeroFloat64, RTTMs: 1},
		{RTTMs: math.MaxUint32},
		{RTTMs: 1},
	}
	statics := []int{math.MinInt, -1, 0, 1, 2400, math.MaxInt}
	for pi, p := range params {
		var c Controller
		c.Reset(p)
		for i := range 5000 {
			c.Step(samples[i%len(samples)])
			if i%997 == 0 {
				c.SetParams(params[(pi+i)%len(params)])
			}
			checkInvariants(t, &c, statics)
		}
	}
}

// checkInvariants fails t unless every output of c is finite and inside its documented range.
func checkInvariants(t *testing.T, c *Controller, statics []int) {
	t.Helper()
	p := c.Params()
	th := c.Throttle()
	if math.IsNaN(th) || math.IsInf(th, 0) || th > 1 || (p.Enabled && th < p.ThrottleFloor) || th <= 0 {
		t.Fatalf("throttle %v outside [%v, 1] (params %+v)", th, p.ThrottleFloor, p)
	}
	if n := c.SendIntervalTicks(); n < 1 || n > max(p.MaxIntervalTicks, 1) {
		t.Fatalf("interval %d outside [1, %d]", n, p.MaxIntervalTicks)
	}
	if r := c.ByteRateCeiling(); math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || (r > 0) != (c.FrameCeilingBytes() > 0) {
		t.Fatalf("ceiling %v B/s, frame ceiling %d", r, c.FrameCeilingBytes())
	}
	if d := c.b.demand; math.IsNaN(d) || math.IsInf(d, 0) || d < 0 || d > maxRate {
		t.Fatalf("demand %v B/s", d)
	}
	if r := c.ByteRateCeiling(); r > 0 && c.FrameCeilingBytes() < p.MinFrameBytes {
		t.Fatalf("frame ceiling %d under the smallest frame %d", c.FrameCeilingBytes(), p.MinFrameBytes)
	}
	l := &c.l
	for _, v := range []float64{l.lost, l.runs, l.judged, l.recentRuns, l.recentJudged, l.rate, l.ceiling, l.beforeRuns, l.beforeJudged} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("loss response: a count or rate of %v (%+v)", v, *l)
		}
	}
	if l.lost > l.judged*(1+1e-9)+1e-9 || l.runs > l.lost*(1+1e-9)+1e-9 {
		t.Fatalf("loss window: %v lost in %v runs of %v judged", l.lost, l.runs, l.judged)
	}
	if l.state == lossTesting != (l.ceiling > 0) && p.Enabled {
		t.Fatalf("loss state %d with a test ceiling of %v", l.state, l.ceiling)
	}
	for _, s := range statics {
		b := c.EffectiveBudget(s)
		if s <= 0 {
			if b != s {
				t.Fatalf("EffectiveBudget(%d) = %d, want pass-through", s, b)
			}
			continue
		}
		if b > s || b < 0 || b < min(s, p.BudgetFloorBytes) {
			t.Fatalf("EffectiveBudget(%d) = %d outside [min(static, %d), static] at throttle %v", s, b, p.BudgetFloorBytes, th)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	var c Controller
	c.Reset(MakeParams(defaultKnobs()))
	c.b.rate = 3000
	c.b.enter(phaseCruise)
	s := Sample{LossRatio: 0.5, RTTMs: 80, ReliableBytesInFlight: 100, AckRTTMs: 90, HaveAckRTT: true}
	tick := uint64(0)
	sink := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s.Delivered.Bytes += 50
		s.Delivered.AtMs += 16
		s.Delivered.SentMs += 10
		s.Delivered.Judged += 2 // a packet in four lost, in runs: the loss response's paths run
		s.Delivered.Lost += tick % 2
		s.Delivered.LossRuns += tick % 4 / 3
		s.Delivered.JudgedSentMs = s.NowMs
		s.NowMs += 16
		s.AckRTTMs += 6
		c.Step(s)
		tick++
		if c.ShouldSend(tick, tick-3) {
			sink += c.EffectiveBudget(2400)
		}
		sink += int(c.SendIntervalTicks()) + c.FrameCeilingBytes() + int(c.ByteRateCeiling())
		if c.Congested() && c.Throttle() < 1 {
			sink++
		}
		c.SetParams(c.Params())
	})
	if allocs != 0 {
		t.Errorf("%v allocations per tick, want 0", allocs)
	}
	_ = sink
}

// ackRun steps c for ticks ticks at a steady ENet RTT, an acknowledgement round trip of ackMs
// sampled every every-th tick, and reports whether any evaluation found it congested.
func ackRun(c *Controller, ticks, every int, ackMs uint32) bool {
	congested := false
	for i := range ticks {
		s := Sample{RTTMs: 50}
		if i%every == 0 {
			s.AckRTTMs, s.HaveAckRTT = ackMs, true
		}
		c.Step(s)
		congested = congested || c.Congested()
	}
	return congested
}

// The acknowledgement round trip is the fast delay signal: a queue that builds on the path trips
// the controller within one evaluation of every sample exceeding the margin, while ENet's
// smoothed RTT has not moved; jitter within the margin and a slower cadence do not.
func TestAckRTTTrigger(t *testing.T) {
	p := triggerParams()
	var c Controller
	c.Reset(p)
	if ackRun(&c, 120, 1, 30) || c.Throttle() != 1 || c.AckBaselineRTTMs() != 30 {
		t.Fatalf("a steady path: congested, throttle %v, baseline %d", c.Throttle(), c.AckBaselineRTTMs())
	}
	if ackRun(&c, 120, 1, 70) { // 40 ms over the baseline: at the margin
		t.Fatal("a rise of exactly the margin read as congestion")
	}
	c.Reset(p)
	ackRun(&c, 60, 1, 30)
	// One sample in the interval within the margin keeps it healthy: the minimum counts.
	for i := range int(p.EvalIntervalTicks) {
		ms := uint32(200)
		if i == 2 {
			ms = 60
		}
		c.Step(Sample{RTTMs: 50, AckRTTMs: ms, HaveAckRTT: true})
	}
	if c.Congested() {
		t.Fatal("congested although one packet of the interval crossed in time")
	}
	if !ackRun(&c, int(p.EvalIntervalTicks), 1, 71) || c.Throttle() != p.DecreaseFactor {
		t.Fatalf("every packet 41 ms over the baseline: throttle %v, want %v", c.Throttle(), p.DecreaseFactor)
	}
	// Anti-feedback: the same path sampled at the floor cadence reads the same.
	c.Reset(p)
	if ackRun(&c, 600, int(p.MaxIntervalTicks), 30) || c.Throttle() != 1 {
		t.Fatalf("a slower cadence read as congestion: throttle %v", c.Throttle())
	}
	// Intervals without a sample give no delay evidence.
	c.Reset(p)
	ackRun(&c, 60, 1, 30)
	for range 120 {
		c.Step(Sample{RTTMs: 50})
		if c.Congested() {
			t.Fatal("an interval without samples tripped the delay trigger")
		}
	}
}
