package pacing

import (
	"math"
	"testing"
)

const ms = int64(1e6) // nanoseconds

func TestRateFor(t *testing.T) {
	tests := []struct {
		name       string
		configured int
		throttle   float64
		want       float64
	}{
		{"unlimited", 0, 0.5, 0},
		{"negative is unlimited", -5, 0.5, 0},
		{"full throttle", 163840, 1, 163840},
		{"halved", 163840, 0.5, 81920},
		{"floor throttle", 163840, 10.0 / 60, 163840 * (10.0 / 60)},
		{"NaN throttle is no controller", 163840, math.NaN(), 163840},
		{"throttle above 1", 163840, 2, 163840},
		{"+Inf throttle", 163840, math.Inf(1), 163840},
		{"zero throttle never becomes unlimited", 163840, 0, 163.84},
		{"negative throttle", 163840, -1, 163.84},
		{"-Inf throttle", 163840, math.Inf(-1), 163.84},
		{"one byte per second stays limited", 1, 0, 0.001},
		{"max int", math.MaxInt, 1, float64(math.MaxInt)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RateFor(tt.configured, tt.throttle)
			if math.Abs(got-tt.want) > 1e-9*tt.want || (tt.want == 0) != (got == 0) {
				t.Errorf("RateFor(%d, %v) = %v, want %v", tt.configured, tt.throttle, got, tt.want)
			}
		})
	}
}

func TestAccrualAndCap(t *testing.T) {
	var p Pacer
	p.SetRate(1000)
	if p.Budget() != 1000 {
		t.Fatalf("fresh budget %v, want a full second (1000)", p.Budget())
	}
	if !p.AdmitReliable(1000) || p.Budget() != 0 {
		t.Fatalf("budget %v after spending it all", p.Budget())
	}
	steps := []struct {
		at    int64
		spend int
		want  float64
	}{
		{0, 0, 0},              // the first Refill anchors the clock
		{100 * ms, 0, 100},     // 0.1 s at 1000 B/s
		{600 * ms, 0, 600},     // carries over and keeps accruing
		{600 * ms, 0, 600},     // no time, no accrual
		{1500 * ms, 0, 1000},   // capped at one second's worth
		{5000 * ms, 300, 1000}, // still capped after a long idle; then 300 spent
		{5100 * ms, 0, 800},    // 700 carried + 100
		{5400 * ms, 0, 1000},   // 700 + 400 capped
	}
	for i, s := range steps {
		p.Refill(s.at)
		if got := p.Budget(); math.Abs(got-s.want) > 1e-9 {
			t.Fatalf("step %d at %d ms: budget %v, want %v", i, s.at/ms, got, s.want)
		}
		if s.spend > 0 && !p.AdmitReliable(s.spend) {
			t.Fatalf("step %d: %d bytes refused with budget %v", i, s.spend, p.Budget())
		}
	}
}

func TestClockEdgeCases(t *testing.T) {
	var p Pacer
	p.SetRate(1000)
	p.AdmitReliable(1000)
	p.Refill(1000 * ms)
	p.Refill(500 * ms) // backwards: re-anchors, no accrual
	if p.Budget() != 0 {
		t.Fatalf("budget %v after the clock went back", p.Budget())
	}
	p.Refill(700 * ms)
	if math.Abs(p.Budget()-200) > 1e-9 {
		t.Fatalf("budget %v, want 200 accrued from the new anchor", p.Budget())
	}
	for _, now := range []int64{math.MinInt64, 0, math.MaxInt64, math.MinInt64, math.MaxInt64} {
		p.Refill(now)
		if b := p.Budget(); math.IsNaN(b) || math.IsInf(b, 0) || b > p.Rate() {
			t.Fatalf("Refill(%d): budget %v", now, b)
		}
	}
}

func TestReliableStallAndRelease(t *testing.T) {
	var p Pacer
	p.SetRate(1000)
	p.Refill(0)
	p.AdmitReliable(1000) // drain
	tests := []struct {
		at    int64
		n     int
		admit bool
	}{
		{100 * ms, 250, false}, // 100 of 250: waits
		{200 * ms, 250, false},
		{249 * ms, 250, false},
		{250 * ms, 250, true}, // exactly fits
		{250 * ms, 1, false},
		{300 * ms, 50, true},
		{300 * ms, 0, true}, // nothing to send always goes
	}
	for i, tt := range tests {
		p.Refill(tt.at)
		if got := p.AdmitReliable(tt.n); got != tt.admit {
			t.Fatalf("step %d at %d ms: AdmitReliable(%d) = %v with budget %v, want %v", i, tt.at/ms, tt.n, got, p.Budget(), tt.admit)
		}
	}
	if p.Budget() < -1e-9 || p.Budget() > 1e-9 {
		t.Errorf("budget %v, want 0: fitting messages never overdraw", p.Budget())
	}
}

func TestOversizedReliableNeverDeadlocks(t *testing.T) {
	tests := []struct {
		name           string
		unreliablePer  int // unreliable bytes queued per round
		wantByMs       int64
		fullAtStart    bool
		wantDebtAfter  float64
		oversizedBytes int
	}{
		{"alone, from an empty budget", 0, 1000 + 17, false, -1500, 2500},
		{"alone, from a full budget", 0, 0, true, -1500, 2500},
		{"under heavy unreliable traffic", 10000, 1000 + 17, false, -1500, 2500},
		{"far larger than a second", 10000, 1000 + 17, false, -99000, 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Pacer
			p.SetRate(1000)
			if !tt.fullAtStart {
				p.AdmitReliable(1000)
			}
			rng := NewRand(1)
			sentAt := int64(-1)
			// 60 Hz rounds: the oversized reliable message heads the queue; unreliable packets of
			// 100 bytes compete for the budget.
			for round := int64(0); round < 600 && sentAt < 0; round++ {
				now := round * 1000 * ms / 60
				p.Refill(now)
				if p.AdmitReliable(tt.oversizedBytes) {
					sentAt = now
					if math.Abs(p.Budget()-tt.wantDebtAfter) > 1e-6 {
						t.Errorf("budget %v after sending, want the debt %v", p.Budget(), tt.wantDebtAfter)
					}
					break
				}
				backlog := tt.oversizedBytes + tt.unreliablePer
				for range tt.unreliablePer / 100 {
					p.AdmitUnreliable(100, backlog, rng.Uint32())
					backlog -= 100
				}
			}
			if sentAt < 0 || sentAt > tt.wantByMs*ms {
				t.Fatalf("sent at %d ms, want by %d ms", sentAt/ms, tt.wantByMs)
			}
			// The debt holds everything back until it is repaid.
			p.Refill(sentAt + 1000*ms)
			if p.AdmitUnreliable(100, 100, 0) != (p.Budget() > 0) {
				t.Errorf("unreliable admission with budget %v", p.Budget())
			}
		})
	}
}

func TestReliableReservationProtectsFromUnreliable(t *testing.T) {
	// A 10 KB reliable message at 163840 B/s under an unreliable flood far above the rate: without
	// the reservation it would starve; with it, it goes as soon as the budget reaches its size.
	const rate = 163840
	var p Pacer
	p.SetRate(rate)
	p.AdmitReliable(rate)
	p.Refill(0)
	rng := NewRand(7)
	for round := int64(1); round < 60; round++ {
		p.Refill(round * 1000 * ms / 60)
		if p.AdmitReliable(10000) {
			// 10000 B at 163840 B/s is 61 ms: the fourth round at 60 Hz (66.7 ms).
			if round != 4 {
				t.Errorf("admitted in round %d, want 4", round)
			}
			return
		}
		backlog := 10000 + 50*1200
		for range 50 {
			if p.AdmitUnreliable(1200, backlog, rng.Uint32()) {
				t.Fatalf("round %d: an unreliable packet took budget reserved by a waiting reliable message", round)
			}
			backlog -= 1200
		}
	}
	t.Fatal("the reliable message never went")
}

func TestUnreliableDropProbability(t *testing.T) {
	// Per-packet keep probability is budget/backlog (drop = max(backlog - budget, 0) / backlog),
	// measured over many independent draws.
	tests := []struct {
		budget   float64
		reserved float64
		backlog  int
	}{
		{0, 0, 1000},
		{100, 0, 1000},
		{250, 0, 1000},
		{500, 0, 1000},
		{999, 0, 1000},
		{1000, 0, 1000},
		{5000, 0, 1000},
		{900, 400, 1000},  // a waiting reliable message reserved 400: keep 0.5
		{300, 400, 1000},  // reserved more than the budget: drop everything
		{-200, 0, 1000},   // in debt: drop everything
		{1200, 0, 1},      // backlog smaller than the packet counts the packet
		{600, 0, 1 << 20}, // tiny keep probability
	}
	const draws = 400000
	for i, tt := range tests {
		rng := NewRand(uint32(i + 1))
		kept := 0
		for range draws {
			p := Pacer{rate: 1e6, budget: tt.budget, reserved: tt.reserved}
			if p.AdmitUnreliable(1, tt.backlog, rng.Uint32()) {
				kept++
				if p.Budget() != tt.budget-1 {
					t.Fatalf("budget %v after sending 1 byte from %v", p.Budget(), tt.budget)
				}
			}
		}
		avail := tt.budget - tt.reserved
		want := math.Min(math.Max(avail, 0)/float64(max(tt.backlog, 1)), 1)
		got := float64(kept) / draws
		sigma := math.Sqrt(want * (1 - want) / draws)
		if math.Abs(got-want) > 5*sigma+1e-6 {
			t.Errorf("budget %v reserved %v backlog %d: kept %.5f, want %.5f (±%.5f)", tt.budget, tt.reserved, tt.backlog, got, want, 5*sigma)
		}
		if want == 0 && kept != 0 || want == 1 && kept != draws {
			t.Errorf("budget %v backlog %d: kept %d of %d, want exactly %v", tt.budget, tt.backlog, kept, draws, want)
		}
	}
}

func TestUnreliableRoundSpendsTheBudget(t *testing.T) {
	// Passing the remaining backlog per packet makes the bytes sent in a round equal the budget
	// on average, whatever the backlog.
	for _, packets := range []int{4, 10, 50, 400} {
		const budget, size, rounds = 3000.0, 100, 20000
		rng := NewRand(uint32(packets))
		total := 0
		for range rounds {
			p := Pacer{rate: 1e6, budget: budget}
			backlog := packets * size
			for range packets {
				if p.AdmitUnreliable(size, backlog, rng.Uint32()) {
					total += size
				}
				backlog -= size
			}
		}
		mean := float64(total) / rounds
		want := math.Min(budget, float64(packets*size))
		if math.Abs(mean-want) > 0.01*want {
			t.Errorf("%d packets of %d B against %v B: %.1f B sent a round, want %.0f", packets, size, budget, mean, want)
		}
	}
}

func TestUnlimitedPassesEverything(t *testing.T) {
	rates := []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, r := range rates {
		var p Pacer
		p.SetRate(1000)
		p.SetRate(r)
		if p.Rate() != 0 || p.Budget() != 0 {
			t.Fatalf("SetRate(%v): rate %v budget %v, want unlimited", r, p.Rate(), p.Budget())
		}
		for i := range 1000 {
			p.Refill(int64(i) * ms)
			if !p.AdmitReliable(math.MaxInt) || !p.AdmitUnreliable(1<<20, 1<<30, math.MaxUint32) {
				t.Fatalf("SetRate(%v): refused while unlimited", r)
			}
		}
	}
	var zero Pacer
	if !zero.AdmitReliable(1<<30) || !zero.AdmitUnreliable(1200, 1<<30, math.MaxUint32) {
		t.Error("the zero Pacer refused")
	}
}

func TestRateChangesMidRun(t *testing.T) {
	var p Pacer
	p.SetRate(1000)
	p.Refill(0)
	p.AdmitReliable(1000)
	p.Refill(500 * ms)
	check := func(step string, want float64) {
		t.Helper()
		if math.Abs(p.Budget()-want) > 1e-9 {
			t.Fatalf("%s: budget %v, want %v", step, p.Budget(), want)
		}
	}
	check("accrued at 1000 B/s", 500)
	p.SetRate(400)
	check("lower rate caps the carried budget", 400)
	p.Refill(1000 * ms)
	check("capped at the new second", 400)
	p.SetRate(2000)
	check("higher rate keeps the budget", 400)
	p.Refill(1500 * ms)
	check("accrues at the new rate", 1400)
	p.SetRate(0)
	check("unlimited", 0)
	p.Refill(2000 * ms)
	p.SetRate(1000)
	check("limited again starts full", 1000)
	p.Refill(2500 * ms)
	check("no credit for the unlimited time beyond the cap", 1000)

	// A reservation lasts only its round.
	p.AdmitReliable(1000)
	p.AdmitReliable(900) // refused, reserves 900
	p.SetRate(100)
	p.Refill(3000 * ms) // new round: 50 accrued
	if !p.AdmitUnreliable(10, 10, math.MaxUint32) {
		t.Errorf("unreliable refused with budget %v and no waiting reliable message", p.Budget())
	}
}

// simulate runs 60 Hz rounds of an always-backlogged session for the given time and returns the
// bytes sent. rateAt gives the rate at each round.
func simulate(p *Pacer, startRound, rounds int, rateAt func(round int) float64, reliableSize func() int, unreliablePerRound int, rng *Rand) int {
	sent := 0
	pending := reliableSize()
	for round := startRound; round < startRound+rounds; round++ {
		p.SetRate(rateAt(round))
		p.Refill(int64(round) * 1000 * ms / 60)
		for pending > 0 && p.AdmitReliable(pending) {
			sent += pending
			pending = reliableSize()
		}
		backlog := max(pending, 0) + unreliablePerRound
		for range unreliablePerRound / 1200 {
			if p.AdmitUnreliable(1200, backlog, rng.Uint32()) {
				sent += 1200
			}
			backlog -= 1200
		}
	}
	return sent
}

func TestLongRunThroughputEqualsRate(t *testing.T) {
	const rate = 163840.0
	const seconds = 300
	tests := []struct {
		name       string
		reliable   bool
		unreliable int // bytes per round
	}{
		{"unreliable only, 3x over the rate", false, 3 * 1200 * 3},
		{"unreliable only, 30x over the rate", false, 30 * 1200 * 3},
		{"reliable only", true, 0},
		{"reliable and unreliable", true, 5 * 1200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Pacer
			rng := NewRand(42)
			sizes := NewRand(9)
			reliableSize := func() int {
				if !tt.reliable {
					return 0
				}
				return 100 + int(sizes.Uint32()%3000)
			}
			sent := simulate(&p, 0, seconds*60, func(int) float64 { return rate }, reliableSize, tt.unreliable, &rng)
			want := rate * seconds
			t.Logf("sent %d B in %d s at %.0f B/s: %+.3f%%", sent, seconds, rate, 100*(float64(sent)-want)/want)
			if math.Abs(float64(sent)-want) > 0.01*want {
				t.Errorf("sent %d B in %d s, want %.0f ± 1%% (%.3f%% off)", sent, seconds, want, 100*(float64(sent)-want)/want)
			}
			// Hard bound: never more than the rate, one second's burst and one packet's overdraw.
			if float64(sent) > want+rate+3100 {
				t.Errorf("sent %d B, more than the rate allows", sent)
			}
		})
	}
}

func TestThroughputFollowsRateChanges(t *testing.T) {
	var p Pacer
	rng := NewRand(5)
	rates := []float64{100000, 25000, 163840}
	round := 0
	for i, r := range rates {
		const seconds = 120
		sent := simulate(&p, round, seconds*60, func(int) float64 { return r }, func() int { return 0 }, 10*1200, &rng)
		round += seconds * 60
		want := r * seconds
		// The first second after a change may spend budget carried from the previous rate.
		if math.Abs(float64(sent)-want) > 0.01*want+max(r, rates[max(i-1, 0)]) {
			t.Errorf("phase %d at %v B/s: sent %d B, want %.0f", i, r, sent, want)
		}
	}
}

func TestRand(t *testing.T) {
	var zero Rand
	a, b := NewRand(0), NewRand(0)
	sum := 0.0
	const n = 100000
	for range n {
		x, y, z := zero.Uint32(), a.Uint32(), b.Uint32()
		if x != y || y != z {
			t.Fatal("the zero Rand and NewRand(0) differ")
		}
		if x == 0 {
			t.Fatal("xorshift produced 0")
		}
		sum += float64(x)
	}
	if mean := sum / n / (1 << 32); math.Abs(mean-0.5) > 0.01 {
		t.Errorf("mean draw %.4f of the range, want 0.5", mean)
	}
	c, d := NewRand(1), NewRand(2)
	if c.Uint32() == d.Uint32() {
		t.Error("different seeds gave the same first draw")
	}
}

func TestNoAllocations(t *testing.T) {
	var p Pacer
	rng := NewRand(3)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 16 * ms
		p.SetRate(RateFor(163840, 0.7))
		p.Refill(now)
		p.AdmitReliable(500)
		backlog := 500 + 3*1200
		for range 3 {
			p.AdmitUnreliable(1200, backlog, rng.Uint32())
			backlog -= 1200
		}
		_ = p.Budget()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per round, want 0", allocs)
	}
}
