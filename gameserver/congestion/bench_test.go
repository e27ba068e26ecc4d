package congestion

import "testing"

// BenchmarkControllerStep measures one tick of the congestion path for one peer: Step plus both
// levers, as the broadcaster runs them, over many peers so caches behave as on a full server.
func BenchmarkControllerStep(b *testing.B) {
	const peers = 1024
	cs := make([]Controller, peers)
	p := MakeParams(defaultKnobs())
	for i := range cs {
		cs[i].Reset(p)
	}
	samples := [...]Sample{
		{RTTMs: 50},
		{LossRatio: 0.05, RTTMs: 60},
		{RTTMs: 120, ReliableBytesInFlight: 40000},
		{LossRatio: 0.01, RTTMs: 55},
	}
	sink := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c := &cs[i%peers]
		c.Step(samples[(i/peers)%len(samples)])
		tick := uint64(i / peers)
		if c.ShouldSend(tick, tick-2) {
			sink += c.EffectiveBudget(2400)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/peer-tick")
	b.ReportMetric(1e6*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "peers/ms")
	_ = sink
}

// BenchmarkLossEstimator measures one tick of loss estimation for one peer sending two packets a
// tick: two OnSent, one OnAckField and one Update.
func BenchmarkLossEstimator(b *testing.B) {
	var e LossEstimator
	seq := uint16(0)
	now := int64(0)
	sink := 0.0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e.OnSent(seq, 100, now)
		e.OnSent(seq+1, 100, now)
		if seq%16 != 0 { // one packet in 16 lost
			e.OnAckField(seq-10, 0xfffffffe)
		}
		seq += 2
		now += 16
		sink += e.Update(now, 80)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/peer-tick")
	_ = sink
}
