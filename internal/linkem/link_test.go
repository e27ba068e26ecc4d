package linkem

import (
	"math"
	"slices"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func newTestLink(seed uint64, imp Impairment) *link {
	l := newLink(seed, 0, downstream)
	l.setImpairment(Profile{Down: imp}.WithDefaults().Down)
	return l
}

// runLink feeds n packets of size bytes, spaced by gap ns, and returns per packet the departure
// times of its copies.
func runLink(l *link, n, size int, gap int64) [][]int64 {
	out := make([][]int64, n)
	for i := range n {
		deps, k := l.admit(int64(i)*gap, size)
		out[i] = slices.Clone(deps[:k])
	}
	return out
}

func TestLinkLossRatio(t *testing.T) {
	const n = 200_000
	tests := []struct {
		name      string
		imp       Impairment
		wantLoss  float64
		wantBurst float64 // mean run length of consecutive losses; 0: don't check
	}{
		{"none", Impairment{}, 0, 0},
		{"bernoulli 5%", Impairment{Loss: 0.05}, 0.05, 1 / 0.95},
		{"bernoulli 30%", Impairment{Loss: 0.30}, 0.30, 1 / 0.70},
		{"all", Impairment{Loss: 1}, 1, 0},
		{"gilbert 5% bursts of 4", Impairment{Loss: 0.05, LossBurst: 4}, 0.05, 4},
		{"gilbert 20% bursts of 10", Impairment{Loss: 0.20, LossBurst: 10}, 0.20, 10},
		{
			"gilbert-elliott explicit",
			Impairment{GilbertElliott: &GilbertElliott{P: 0.02, R: 0.25, LossGood: 0.01, LossBad: 0.6}},
			(0.25*0.01 + 0.02*0.6) / 0.27, 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLink(42, tt.imp)
			deps := runLink(l, n, 100, ms)
			lost, bursts := 0, 0
			for i, d := range deps {
				if len(d) == 0 {
					lost++
					if i == 0 || len(deps[i-1]) > 0 {
						bursts++
					}
				}
			}
			if uint64(lost) != l.c.droppedLoss {
				t.Fatalf("lost %d packets but counted %d", lost, l.c.droppedLoss)
			}
			got := float64(lost) / n
			// Bursty loss has fewer independent events, so its sampling error is larger.
			tol := 0.005
			if tt.wantBurst > 2 {
				tol = 0.015
			}
			if math.Abs(got-tt.wantLoss) > tol {
				t.Errorf("loss ratio %.4f, want %.4f ± %.3f", got, tt.wantLoss, tol)
			}
			if tt.wantBurst > 0 {
				burst := float64(lost) / float64(bursts)
				if math.Abs(burst-tt.wantBurst)/tt.wantBurst > 0.08 {
					t.Errorf("mean burst %.2f packets, want %.2f ± 8%%", burst, tt.wantBurst)
				}
			}
		})
	}
}

func TestLinkDeterministic(t *testing.T) {
	imp := Impairment{Loss: 0.1, LossBurst: 3, Duplicate: 0.05, Reorder: 0.05, DelayMs: 30, JitterMs: 5}
	pattern := func(seed uint64, index int, d direction, imp Impairment) [][]int64 {
		l := newLink(seed, index, d)
		l.setImpairment(Profile{Down: imp}.WithDefaults().Down)
		return runLink(l, 5000, 200, 2*ms)
	}
	lossOnly := func(deps [][]int64) []bool {
		lost := make([]bool, len(deps))
		for i, d := range deps {
			lost[i] = len(d) == 0
		}
		return lost
	}
	a := pattern(7, 0, downstream, imp)
	if b := pattern(7, 0, downstream, imp); !slices.EqualFunc(a, b, slices.Equal) {
		t.Error("same seed, client and packets gave different decisions")
	}
	for _, other := range []struct {
		name  string
		seed  uint64
		index int
		d     direction
	}{{"seed", 8, 0, downstream}, {"client", 7, 1, downstream}, {"direction", 7, 0, upstream}} {
		if b := pattern(other.seed, other.index, other.d, imp); slices.Equal(lossOnly(a), lossOnly(b)) {
			t.Errorf("a different %s gave the same loss pattern", other.name)
		}
	}
	// The loss stream is private: other settings do not move the loss pattern.
	changed := imp
	changed.JitterMs, changed.Duplicate, changed.Reorder, changed.DelayMs = 20, 0.3, 0, 5
	if b := pattern(7, 0, downstream, changed); !slices.Equal(lossOnly(a), lossOnly(b)) {
		t.Error("changing jitter, duplication, reordering and delay moved the loss pattern")
	}
}

func TestLinkBottleneck(t *testing.T) {
	// 1000 B/s and 100 B packets: each takes 100 ms on the wire.
	tests := []struct {
		name     string
		imp      Impairment
		arrivals []int64 // ns
		want     []int64 // departure per packet, -1 for tail-dropped
	}{
		{
			name:     "idle link serializes each packet",
			imp:      Impairment{RateBytesPerSec: 1000, QueueMs: 1000},
			arrivals: []int64{0, 500 * ms, 1000 * ms},
			want:     []int64{100 * ms, 600 * ms, 1100 * ms},
		},
		{
			name:     "burst queues behind the link",
			imp:      Impairment{RateBytesPerSec: 1000, QueueMs: 1000},
			arrivals: []int64{0, 0, 0, 50 * ms},
			want:     []int64{100 * ms, 200 * ms, 300 * ms, 400 * ms},
		},
		{
			name:     "queue time limit tail-drops",
			imp:      Impairment{RateBytesPerSec: 1000, QueueMs: 250},
			arrivals: []int64{0, 0, 0, 0, 100 * ms},
			want:     []int64{100 * ms, 200 * ms, -1, -1, 300 * ms},
		},
		{
			name:     "queue byte limit tail-drops",
			imp:      Impairment{RateBytesPerSec: 1000, QueueBytes: 300},
			arrivals: []int64{0, 0, 0, 0, 150 * ms},
			want:     []int64{100 * ms, 200 * ms, 300 * ms, -1, 400 * ms},
		},
		{
			name:     "delay adds after the bottleneck",
			imp:      Impairment{RateBytesPerSec: 1000, QueueMs: 1000, DelayMs: 40},
			arrivals: []int64{0, 0},
			want:     []int64{140 * ms, 240 * ms},
		},
		{
			name:     "no rate: delay only",
			imp:      Impairment{DelayMs: 80},
			arrivals: []int64{0, 0, 7 * ms},
			want:     []int64{80 * ms, 80 * ms, 87 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLink(1, tt.imp)
			got := make([]int64, len(tt.arrivals))
			for i, at := range tt.arrivals {
				deps, n := l.admit(at, 100)
				switch n {
				case 0:
					got[i] = -1
				case 1:
					got[i] = deps[0]
				default:
					t.Fatalf("packet %d: %d copies", i, n)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("departures %v, want %v", got, tt.want)
			}
		})
	}
}

// A policer passes what its bucket holds the bytes for and drops the rest: a stream over its
// rate loses the excess, at once once the bucket is spent, and is delayed by nothing; a stream
// under it passes whole.
func TestLinkPolicer(t *testing.T) {
	// 1000 B packets every 10 ms: 100000 B/s offered.
	tests := []struct {
		name      string
		rate      int64
		burst     int64
		wantShare float64
	}{
		{"over the rate", 40000, 5000, 0.4},
		{"under the rate", 120000, 5000, 1},
		{"default bucket", 50000, 0, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLink(3, Impairment{PolicerBytesPerSec: tt.rate, PolicerBurstBytes: tt.burst, DelayMs: 20})
			const n = 10000
			passed := 0
			for i, d := range runLink(l, n, 1000, 10*ms) {
				if len(d) == 0 {
					continue
				}
				passed++
				if d[0] != int64(i)*10*ms+20*ms {
					t.Fatalf("packet %d left at %d ns, want it delayed by the 20 ms of the path only", i, d[0])
				}
			}
			if share := float64(passed) / n; math.Abs(share-tt.wantShare) > 0.01 {
				t.Errorf("passed %.3f of the packets, want %.2f", share, tt.wantShare)
			}
			if got := l.stats().DroppedPolicer; got != uint64(n-passed) {
				t.Errorf("DroppedPolicer %d, want %d", got, n-passed)
			}
		})
	}
	// The bucket's burst passes back to back; a new policer starts with its bucket full.
	l := newTestLink(3, Impairment{PolicerBytesPerSec: 1000, PolicerBurstBytes: 3000})
	if deps := runLink(l, 5, 1000, 0); len(deps[2]) != 1 || len(deps[3]) != 0 {
		t.Errorf("burst of five 1000 B packets through a 3000 B bucket: %v, want three passed", deps)
	}
}

func TestLinkThroughputAndQueueDelay(t *testing.T) {
	// Offer twice the cap for 10 s: the link must carry exactly the cap, hold the queue at its
	// limit and tail-drop the rest.
	const rate, size, queue = 100_000, 500, 100
	l := newTestLink(3, Impairment{RateBytesPerSec: rate, QueueMs: queue})
	gap := int64(time.Second) * size / (2 * rate)
	n := int(10 * int64(time.Second) / gap)
	deps := runLink(l, n, size, gap)
	var first, last int64 = -1, 0
	sent := 0
	for _, d := range deps {
		if len(d) == 1 {
			if first < 0 {
				first = d[0]
			}
			last = d[0]
			sent++
		}
	}
	got := float64((sent-1)*size) / (float64(last-first) / float64(time.Second))
	if math.Abs(got-rate)/rate > 0.001 {
		t.Errorf("throughput %.0f B/s, want %d", got, rate)
	}
	if l.c.droppedQueue == 0 || int(l.c.droppedQueue)+sent != n {
		t.Errorf("sent %d + tail-dropped %d != offered %d", sent, l.c.droppedQueue, n)
	}
	st := l.stats()
	if p95 := st.QueueDelayP95; p95 < 94*time.Millisecond || p95 > queue*time.Millisecond {
		t.Errorf("queueing delay p95 %v, want within [94ms, %dms]", p95, queue)
	}
}

func TestLinkJitter(t *testing.T) {
	const n = 20_000
	tests := []struct {
		name             string
		imp              Impairment
		lo, hi, wantStd  float64 // ms
		gap              int64
		wantOrderedDense bool
	}{
		{"uniform", Impairment{DelayMs: 80, JitterMs: 10}, 70, 90, 20 / math.Sqrt(12), 25 * ms, false},
		{"normal", Impairment{DelayMs: 80, JitterMs: 5, JitterDist: JitterNormal}, 50, 110, 5, 25 * ms, false},
		{"never below zero", Impairment{DelayMs: 2, JitterMs: 10}, 0, 12, -1, 25 * ms, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLink(11, tt.imp)
			var sum, sumSq float64
			for i := range n {
				at := int64(i) * tt.gap
				deps, k := l.admit(at, 100)
				if k != 1 {
					t.Fatalf("packet %d: %d copies", i, k)
				}
				d := float64(deps[0]-at) / float64(ms)
				if d < tt.lo || d > tt.hi {
					t.Fatalf("packet %d delayed %.3f ms, outside [%v, %v]", i, d, tt.lo, tt.hi)
				}
				sum += d
				sumSq += d * d
			}
			mean := sum / n
			std := math.Sqrt(sumSq/n - mean*mean)
			if tt.wantStd > 0 {
				if math.Abs(mean-tt.imp.DelayMs) > 0.2 {
					t.Errorf("mean delay %.3f ms, want %v ± 0.2", mean, tt.imp.DelayMs)
				}
				if math.Abs(std-tt.wantStd)/tt.wantStd > 0.03 {
					t.Errorf("delay std %.3f ms, want %.3f ± 3%%", std, tt.wantStd)
				}
			}
		})
	}
	t.Run("keeps order when packets are dense", func(t *testing.T) {
		l := newTestLink(5, Impairment{DelayMs: 50, JitterMs: 20})
		deps := runLink(l, n, 100, ms/4)
		for i := 1; i < n; i++ {
			if deps[i][0] < deps[i-1][0] {
				t.Fatalf("packet %d leaves at %d, before packet %d at %d", i, deps[i][0], i-1, deps[i-1][0])
			}
		}
	})
}

func TestLinkDuplicateAndReorder(t *testing.T) {
	const n = 100_000
	l := newTestLink(9, Impairment{Duplicate: 0.1, Reorder: 0.05, ReorderDelayMs: 10, DelayMs: 20})
	deps := runLink(l, n, 100, ms)
	dups, held := 0, 0
	for i, d := range deps {
		at := int64(i) * ms
		switch {
		case len(d) == 2:
			dups++
		case len(d) != 1:
			t.Fatalf("packet %d: %d copies", i, len(d))
		}
		if d[0]-at == 30*ms {
			held++
		}
	}
	if got := float64(dups) / n; math.Abs(got-0.1) > 0.003 || uint64(dups) != l.c.duplicated {
		t.Errorf("duplicated %.4f (counted %d of %d), want 0.1 ± 0.003", got, l.c.duplicated, dups)
	}
	if got := float64(held) / n; math.Abs(got-0.05) > 0.003 || uint64(held) != l.c.reordered {
		t.Errorf("held back %.4f (counted %d of %d), want 0.05 ± 0.003", got, l.c.reordered, held)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 {
		t.Fatal("empty histogram has a median")
	}
	// 1..100000 µs uniformly: quantiles land within the 6.25% bucket width.
	for us := 1; us <= 100_000; us++ {
		h.record(time.Duration(us) * time.Microsecond)
	}
	for _, q := range []float64{0.01, 0.5, 0.95, 0.99} {
		want := q * 100_000 * float64(time.Microsecond)
		got := float64(h.quantile(q))
		if math.Abs(got-want)/want > 0.035 {
			t.Errorf("q%.2f = %v, want %v ± 3.5%%", q, time.Duration(got), time.Duration(want))
		}
	}
	if h.max != 100*time.Millisecond || h.quantile(1) != h.max {
		t.Errorf("max %v, q1 %v", h.max, h.quantile(1))
	}
	var big histogram
	big.record(time.Hour)
	big.record(-time.Second)
	if big.quantile(1) != time.Hour || big.quantile(0) != 0 {
		t.Errorf("out-of-range values: q0 %v q1 %v", big.quantile(0), big.quantile(1))
	}
}

func BenchmarkLinkAdmit(b *testing.B) {
	l := newTestLink(1, Impairment{Loss: 0.05, LossBurst: 2, DelayMs: 50, JitterMs: 5, Duplicate: 0.01, Reorder: 0.01, RateBytesPerSec: 1e9})
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now += 10_000
		l.admit(now, 1200)
	}
}
