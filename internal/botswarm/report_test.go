package botswarm

import (
	"math"
	"testing"
)

func TestAgeBuckets(t *testing.T) {
	prev := -1
	for ms := int32(0); ms <= ageMaxMs+100; ms++ {
		i := ageBucket(ms)
		if i < prev || i > prev+1 {
			t.Fatalf("age %d: bucket %d after %d, want monotonic without gaps", ms, i, prev)
		}
		prev = i
		low, width := bucketLow(i)
		if ms <= ageMaxMs && (int(ms) < low || int(ms) >= low+width) {
			t.Fatalf("age %d in bucket %d = [%d, %d)", ms, i, low, low+width)
		}
		if ms >= ageExact && ms <= ageMaxMs && float64(width)/float64(low) > 1.0/ageSubBuckets {
			t.Fatalf("bucket %d = [%d, %d) wider than 1/%d", i, low, low+width, ageSubBuckets)
		}
	}
	if prev != ageBuckets-1 {
		t.Fatalf("last bucket %d, want %d", prev, ageBuckets-1)
	}
	if ageBucket(-5) != 0 || ageBucket(math.MaxInt32) != ageBuckets-1 {
		t.Fatal("out-of-range ages not clamped")
	}
}

func TestAgeHistQuantile(t *testing.T) {
	tests := []struct {
		name string
		ages []int32
		q    float64
		want float64
	}{
		{name: "empty", q: 0.5, want: -1},
		{name: "one", ages: []int32{7}, q: 0.95, want: 7},
		{name: "median of exact", ages: []int32{1, 2, 3, 4, 5}, q: 0.5, want: 3},
		{name: "p95 of 1..100", ages: seq(1, 100), q: 0.95, want: 93.5}, // 95 is in bucket [92, 96)
		{name: "q clamped low", ages: []int32{3, 9}, q: -1, want: 3},
		{name: "q clamped high", ages: []int32{3, 9}, q: 2, want: 9},
		{name: "overflow", ages: []int32{ageMaxMs + 5000}, q: 0.5, want: ageMaxMs + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h AgeHist
			var tot ageTotal
			for _, a := range tc.ages {
				h.Add(a)
				tot.add(a)
			}
			if got := h.Quantile(tc.q); got != tc.want {
				t.Errorf("AgeHist.Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
			if got := tot.quantile(tc.q); got != tc.want {
				t.Errorf("ageTotal.quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
			if h.Count() != uint64(len(tc.ages)) {
				t.Errorf("Count = %d, want %d", h.Count(), len(tc.ages))
			}
		})
	}
}

func TestAgeHistSaturates(t *testing.T) {
	var h AgeHist
	for range 70000 {
		h.Add(1)
	}
	if h.Count() != math.MaxUint16 {
		t.Fatalf("Count = %d, want saturation at %d", h.Count(), math.MaxUint16)
	}
	var tot ageTotal
	tot.merge(&h)
	tot.merge(&h)
	if got := count(tot.counts[:]); got != 2*math.MaxUint16 {
		t.Fatalf("merged count %d, want %d", got, 2*math.MaxUint16)
	}
}

func seq(lo, hi int32) []int32 {
	var out []int32
	for v := lo; v <= hi; v++ {
		out = append(out, v)
	}
	return out
}

// fakeClient builds a ClientReport whose second t has hz[t] snapshots (negative: not full).
func fakeClient(hz ...int) ClientReport {
	var c ClientReport
	for t, v := range hz {
		sec := Second{T: t, Full: v >= 0}
		if v >= 0 {
			sec.Hz, sec.Packets, sec.Bytes, sec.Applied = v, v, 1000*v, 2*v
			sec.Lost = 1
			for range v {
				sec.Age.Add(int32(t))
			}
		}
		c.Series = append(c.Series, sec)
	}
	return c
}

func TestSummarize(t *testing.T) {
	clients := []ClientReport{
		fakeClient(-1, 60, 60, 30),
		fakeClient(-1, 60, 10, 10),
		fakeClient(-1, -1, -1, -1),
	}
	tests := []struct {
		name     string
		from, to int
		want     Summary
	}{
		{name: "all", from: 0, to: 0, want: Summary{
			Clients: 2, Seconds: 6, HzMedian: 35, HzMin: 10, HzMax: 60, KBps: 230.0 / 6,
			AgeP50Ms: 1, AgeP95Ms: 3, AppliedPerSec: 460.0 / 6, LossPct: 100 * 6.0 / 236, Unapplied: 0,
		}},
		{name: "window", from: 2, to: 3, want: Summary{
			Clients: 2, Seconds: 2, HzMedian: 35, HzMin: 10, HzMax: 60, KBps: 35,
			AgeP50Ms: 2, AgeP95Ms: 2, AppliedPerSec: 70, LossPct: 100 * 2.0 / 72,
		}},
		{name: "only partial seconds", from: 0, to: 1, want: Summary{AgeP50Ms: -1, AgeP95Ms: -1}},
		{name: "past the end", from: 9, to: 0, want: Summary{AgeP50Ms: -1, AgeP95Ms: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(clients, tc.from, tc.to)
			if !closeSummary(got, tc.want) {
				t.Fatalf("Summarize(%d, %d) =\n %+v\nwant\n %+v", tc.from, tc.to, got, tc.want)
			}
		})
	}
}

func closeSummary(a, b Summary) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Clients == b.Clients && a.Seconds == b.Seconds && near(a.HzMedian, b.HzMedian) &&
		a.HzMin == b.HzMin && a.HzMax == b.HzMax && near(a.KBps, b.KBps) && near(a.AgeP50Ms, b.AgeP50Ms) &&
		near(a.AgeP95Ms, b.AgeP95Ms) && near(a.AppliedPerSec, b.AppliedPerSec) && near(a.LossPct, b.LossPct) &&
		a.Unapplied == b.Unapplied
}

func TestClassSeries(t *testing.T) {
	clients := []ClientReport{fakeClient(-1, 60, 30), fakeClient(20, 40, -1)}
	got := classSeries(clients, 4)
	want := []ClassSecondStat{
		{T: 0, Clients: 1, HzMedian: 20, HzMin: 20, HzMax: 20, KBps: 20, AgeP50Ms: 0, AgeP95Ms: 0},
		{T: 1, Clients: 2, HzMedian: 50, HzMin: 40, HzMax: 60, KBps: 50, AgeP50Ms: 1, AgeP95Ms: 1},
		{T: 2, Clients: 1, HzMedian: 30, HzMin: 30, HzMax: 30, KBps: 30, AgeP50Ms: 2, AgeP95Ms: 2},
		{T: 3, AgeP50Ms: -1, AgeP95Ms: -1},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("second %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSentHz(t *testing.T) {
	tests := []struct {
		sec  Second
		want float64
	}{
		{sec: Second{Hz: 60, Packets: 60}, want: 60},
		{sec: Second{Hz: 57, Packets: 57, Lost: 3}, want: 60},
		{sec: Second{Hz: 20, Packets: 40, Lost: 4}, want: 22},
		{sec: Second{Lost: 5}, want: 5},
		{sec: Second{}, want: 0},
	}
	for _, tc := range tests {
		if got := tc.sec.SentHz(); got != tc.want {
			t.Errorf("%+v: SentHz = %v, want %v", tc.sec, got, tc.want)
		}
	}
}

func TestAgeQuantile(t *testing.T) {
	clients := []ClientReport{fakeClient(-1, 60, 60, 30), fakeClient(-1, 60, 10, 10)}
	tests := []struct {
		from, to int
		q        float64
		want     float64
	}{
		{from: 0, to: 0, q: 0.05, want: 1},
		{from: 0, to: 0, q: 1, want: 3},
		{from: 2, to: 3, q: 0.5, want: 2},
		{from: 0, to: 1, q: 0.5, want: -1},
	}
	for _, tc := range tests {
		if got := AgeQuantile(clients, tc.from, tc.to, tc.q); got != tc.want {
			t.Errorf("AgeQuantile(%d, %d, %v) = %v, want %v", tc.from, tc.to, tc.q, got, tc.want)
		}
	}
}
