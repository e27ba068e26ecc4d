package pacing

import "testing"

// BenchmarkPacerRound measures one session's pacing round at 60 Hz: a rate update, a refill, one
// reliable admission and three unreliable packets.
func BenchmarkPacerRound(b *testing.B) {
	const sessions = 1024
	ps := make([]Pacer, sessions)
	rng := NewRand(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := &ps[i%sessions]
		round := int64(i / sessions)
		p.SetRate(RateFor(163840, 0.7))
		p.Refill(round * 16_666_667)
		p.AdmitReliable(200)
		backlog := 200 + 3*1200
		for range 3 {
			p.AdmitUnreliable(1200, backlog, rng.Uint32())
			backlog -= 1200
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/session-round")
	b.ReportMetric(1e6*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "sessions/ms")
}

// BenchmarkAdmitUnreliable measures a single unreliable admission decision.
func BenchmarkAdmitUnreliable(b *testing.B) {
	var p Pacer
	p.SetRate(1e9)
	rng := NewRand(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%64 == 0 {
			p.Refill(int64(i) * 1000)
		}
		p.AdmitUnreliable(1200, 64*1200, rng.Uint32())
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
}
