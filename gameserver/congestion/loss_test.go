package congestion

import (
	"math"
	"testing"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

type inFlight struct {
	arriveMs int64
	seq      uint16
	bits     uint64
}

// link simulates one session: the server sends numbered packets at a chosen cadence over a path
// with a fixed one-way delay and independent data and ACK loss; the client acknowledges every
// received packet with an ACK carrying its bitfield.
type link struct {
	est          LossEstimator
	client       protocol.AckState // the client acknowledges each received packet at once
	rng          testRand
	dataLoss     float64
	ackLoss      float64
	ackDropEvery int // drop every n-th ACK, so never two in a row for n >= 2; 0 drops none
	acks         int
	oneWayMs     int64
	seq          uint16
	toClient     []inFlight
	toServer     []inFlight
	sent, lost   int
	lossEstimate float64
}

func newLink(seed uint64, dataLoss, ackLoss float64, rttMs int64, firstSeq uint16) *link {
	return &link{rng: testRand(seed), dataLoss: dataLoss, ackLoss: ackLoss, oneWayMs: rttMs / 2, seq: firstSeq}
}

// tick advances the link to nowMs: deliveries, then packets sends, then the estimator's Update.
func (l *link) tick(nowMs int64, packets int) {
	for len(l.toClient) > 0 && l.toClient[0].arriveMs <= nowMs {
		l.client.Receive(l.toClient[0].seq)
		l.acks++
		dropped := l.ackDropEvery > 0 && l.acks%l.ackDropEvery == 0
		if l.rng.float() >= l.ackLoss && !dropped {
			l.toServer = append(l.toServer, inFlight{arriveMs: nowMs + l.oneWayMs, seq: l.client.Latest, bits: l.client.Received})
		}
		l.toClient = l.toClient[1:]
	}
	for len(l.toServer) > 0 && l.toServer[0].arriveMs <= nowMs {
		l.est.OnAckField(l.toServer[0].seq, l.toServer[0].bits)
		l.toServer = l.toServer[1:]
	}
	for range packets {
		l.est.OnSent(l.seq, 100, nowMs)
		l.sent++
		if l.rng.float() < l.dataLoss {
			l.lost++
		} else {
			l.toClient = append(l.toClient, inFlight{arriveMs: nowMs + l.oneWayMs, seq: l.seq})
		}
		l.seq++
	}
	l.lossEstimate = l.est.Update(nowMs, uint32(2*l.oneWayMs))
}

func tickMs(tick, hz int) int64 { return int64(tick) * 1000 / int64(hz) }

func TestLossSteadyStateEstimate(t *testing.T) {
	tests := []struct {
		name          string
		hz, perTick   int
		everyNthTick  int
		rttMs         int64
		dataLoss      float64
		ackLoss       float64
		seconds       int
		tolerance     float64
		firstSequence uint16
	}{
		{"no loss 60 Hz", 60, 1, 1, 50, 0, 0, 60, 0, 0},
		{"1% at 60 Hz", 60, 1, 1, 50, 0.01, 0, 300, 0.003, 0},
		{"5% at 60 Hz", 60, 1, 1, 100, 0.05, 0, 120, 0.01, 65000},
		{"20% at 60 Hz, 3 packets per tick", 60, 3, 1, 300, 0.2, 0, 60, 0.02, 0},
		{"5% at 60 Hz decimated to 10 Hz", 60, 1, 6, 100, 0.05, 0, 600, 0.01, 0},
		{"20% at 10 Hz tick rate", 10, 1, 1, 200, 0.2, 0, 600, 0.03, 0},
		{"no data loss, 10% random ACK loss, 60 Hz", 60, 1, 1, 80, 0, 0.1, 300, 0.001, 0},
		{"no data loss, 10% random ACK loss, 10 Hz", 60, 1, 6, 80, 0, 0.1, 600, 0.015, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLink(12345, tt.dataLoss, tt.ackLoss, tt.rttMs, tt.firstSequence)
			ticks := tt.seconds * tt.hz
			warm := 5 * tt.hz
			sum, n := 0.0, 0
			for tick := range ticks {
				packets := 0
				if tick%tt.everyNthTick == 0 {
					packets = tt.perTick
				}
				l.tick(tickMs(tick, tt.hz), packets)
				if tick >= warm {
					sum += l.lossEstimate
					n++
				}
			}
			mean := sum / float64(n)
			want := float64(l.lost) / float64(l.sent)
			if tt.ackLoss > 0 {
				// A received packet is misread as lost only when its own ACK and every later ACK
				// within the margin are lost: about q^5 at 60 Hz here, q^2 = 1% at 10 Hz.
				if mean > tt.tolerance {
					t.Errorf("mean estimate %.4f with %.0f%% ACK loss, want under %.2f", mean, tt.ackLoss*100, tt.tolerance)
				}
				return
			}
			if math.Abs(mean-want) > tt.tolerance || math.Abs(mean-tt.dataLoss) > tt.tolerance+0.01 {
				t.Errorf("mean estimate %.4f, want %.4f ± %.3f (configured %.3f)", mean, want, tt.tolerance, tt.dataLoss)
			}
			if tt.dataLoss == 0 && sum != 0 {
				t.Errorf("lossless link estimated %v, want exactly 0", sum)
			}
		})
	}
}

func TestLossSendingLessNeverReadsAsLoss(t *testing.T) {
	for _, tt := range []struct {
		name         string
		ackDropEvery int
	}{
		{"all ACKs arrive", 0},
		{"one ACK in three lost", 3},
		{"every other ACK lost", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The same lossless path at full rate, then decimated to every 6th tick, then to one
			// send a second: the estimate must read exactly 0 throughout, even when ACKs are
			// lost, as long as no two in a row are.
			l := newLink(99, 0, 0, 120, 0)
			l.ackDropEvery = tt.ackDropEvery
			tick := 0
			run := func(seconds, every int) {
				for range seconds * 60 {
					packets := 0
					if tick%every == 0 {
						packets = 1
					}
					l.tick(tickMs(tick, 60), packets)
					if l.lossEstimate != 0 {
						t.Fatalf("tick %d (every %d): estimate %v on a lossless path", tick, every, l.lossEstimate)
					}
					tick++
				}
			}
			run(10, 1)
			run(10, 6)
			run(10, 60)
			if l.acks == 0 || l.est.totalW == 0 {
				t.Fatalf("nothing was judged: %d ACKs, weight %v", l.acks, l.est.totalW)
			}
		})
	}
}

func TestLossDecimationDoesNotInflateEstimate(t *testing.T) {
	// With a constant 5% path loss, the estimate at 60 Hz and after decimating to 10 Hz agree:
	// the back-off must not read as more loss.
	l := newLink(7, 0.05, 0, 100, 0)
	mean := func(every, seconds int, start int) (float64, int) {
		sum, n := 0.0, 0
		tick := start
		for range seconds * 60 {
			packets := 0
			if tick%every == 0 {
				packets = 1
			}
			l.tick(tickMs(tick, 60), packets)
			sum += l.lossEstimate
			n++
			tick++
		}
		return sum / float64(n), tick
	}
	full, tick := mean(1, 300, 0)
	_, tick = mean(6, 5, tick) // settle
	decimated, _ := mean(6, 1800, tick)
	if decimated > full*1.1 || math.Abs(full-0.05) > 0.01 || math.Abs(decimated-0.05) > 0.01 {
		t.Errorf("estimate %.4f at 60 Hz, %.4f at 10 Hz, want both ≈ 0.05 and no inflation", full, decimated)
	}
}

func TestLossReactionTime(t *testing.T) {
	// Loss steps from 0 to 20% (every 5th packet); the estimate must cross the default 2%
	// threshold within a few hundred milliseconds of the horizon, at 60 Hz and at 10 Hz.
	for _, hz := range []int{60, 10} {
		var e LossEstimator
		const rttMs = 100
		seq := uint16(0)
		onsetMs := int64(-1)
		crossedMs := int64(-1)
		for tick := range 20 * hz {
			now := tickMs(tick, hz)
			lossy := now >= 5000
			if lossy && onsetMs < 0 {
				onsetMs = now
			}
			e.OnSent(seq, 100, now)
			if !lossy || seq%5 != 0 {
				e.OnAck(seq) // acks arrive before the horizon; only the judgment time matters here
			}
			seq++
			if loss := e.Update(now, rttMs); loss > 0.02 && crossedMs < 0 {
				crossedMs = now
				if !lossy {
					t.Fatalf("%d Hz: estimate %v before the onset", hz, loss)
				}
			}
		}
		// A packet sent at the onset is judged once its successor is older than
		// rtt + max(50, rtt/2) = 150 ms; the estimate then crosses 2% within a few judgments.
		delay := crossedMs - onsetMs
		if crossedMs < 0 || delay > 150+1000/int64(hz)+300 {
			t.Errorf("%d Hz: crossed 2%% %d ms after the onset, want within %d ms", hz, delay, 150+1000/hz+300)
		}
		t.Logf("%d Hz: estimate crossed 2%% %d ms after the onset of 20%% loss", hz, delay)
	}
}

func TestLossJudgmentTiming(t *testing.T) {
	var e LossEstimator
	const rtt = 100 // horizon rtt + max(50, rtt/2) = 150 ms
	e.OnSent(0, 100, 0)
	e.OnSent(1, 100, 10)
	e.OnAckFieldAt(1, 0, 110) // a 100 ms round trip; packet 0 not acknowledged
	// Packet 0 is judged once packet 1 is older than 150 ms, at now = 161, a packet sent after it
	// having been acknowledged.
	if got := e.Update(160, rtt); got != 0 || e.count != 2 || e.del.Judged != 0 {
		t.Fatalf("at 160: loss %v count %d judged %d, want nothing judged", got, e.count, e.del.Judged)
	}
	if got := e.Update(161, rtt); got != 1 || e.count != 1 || e.del.Judged != 1 {
		t.Fatalf("at 161: loss %v count %d judged %d, want packet 0 judged lost", got, e.count, e.del.Judged)
	}
	// The delivery count carries the judgments: one judged, lost in one run, sent at 0.
	if d := e.Delivered(); d.Judged != 1 || d.Lost != 1 || d.LossRuns != 1 || d.JudgedSentMs != 0 {
		t.Fatalf("delivery %+v, want 1 judged, 1 lost in 1 run, sent at 0", d)
	}
	// Packet 2, sent at 175, is never acknowledged: packet 1 waits AckStallMs past the horizon,
	// until 175 + 150 + 1000 ms, for an ACK of a later packet.
	e.OnSent(2, 100, 175)
	if e.Update(1325, rtt); e.Delivered().Judged != 1 {
		t.Fatalf("at 1325: %d judged, want packet 1 waiting for a later ACK", e.Delivered().Judged)
	}
	e.Update(1326, rtt)
	if d := e.Delivered(); d.Judged != 2 || d.Lost != 1 || d.JudgedSentMs != 10 {
		t.Fatalf("delivery %+v, want 2 judged, 1 lost, the newest sent at 10", d)
	}
	// The newest packet waits for a successor, however old it gets.
	if e.Update(10000, rtt); e.count != 1 {
		t.Fatalf("count %d, want the last packet still tracked", e.count)
	}
	// A large RTT stretches the margin to rtt/2.
	e.Reset()
	e.OnSent(0, 100, 0)
	e.OnSent(1, 100, 0)
	e.OnAck(0)
	e.OnAck(1)
	if e.Update(600, 400); e.count != 2 {
		t.Fatalf("count %d, want nothing judged before 400 + 200 ms", e.count)
	}
	if got := e.Update(601, 400); got != 0 || e.count != 1 {
		t.Fatalf("loss %v count %d, want packet 0 judged received", got, e.count)
	}
}

// A path whose delay jumps by more than the judging margin delays every ACK at once: none
// arrives within the horizon of the RTT known so far. They are late, not lost: no packet is
// judged until the first of them arrives, and its round trip widens the horizon. The packets
// really lost meanwhile are found, in runs.
func TestLossLateAcksAreNotLoss(t *testing.T) {
	var e LossEstimator
	var client protocol.AckState
	type ack struct {
		at     int64
		latest uint16
		bits   uint64
	}
	var acks []ack
	oneWay := int64(10)
	for tick := range 600 { // 10 s at 60 Hz
		now := int64(tick) * 1000 / 60
		if tick == 120 {
			oneWay = 110 // +200 ms round trip
		}
		for len(acks) > 0 && acks[0].at <= now {
			e.OnAckFieldAt(acks[0].latest, acks[0].bits, acks[0].at)
			acks = acks[1:]
		}
		e.Update(now, 20) // ENet's RTT has not moved
		seq := uint16(tick)
		e.OnSent(seq, 100, now)
		if tick >= 300 && tick%10 < 2 { // from 5 s, two packets in ten lost, back to back
			continue
		}
		client.Receive(seq)
		acks = append(acks, ack{at: now + 2*oneWay, latest: client.Latest, bits: client.Received})
	}
	d := e.Delivered()
	// Lost: packets 300..599 with tick%10 < 2, except those not yet judged at the end.
	if d.Lost == 0 || d.Lost > 60 || d.LossRuns != (d.Lost+1)/2 {
		t.Fatalf("delivery %+v: want only the dropped packets lost, in runs of two", d)
	}
	if first := e.ring[300&lossRingMask]; d.Judged < 500 {
		t.Fatalf("judged %d packets, want nearly all (packet 300: %+v)", d.Judged, first)
	}
}

func TestLossAckEdgeCases(t *testing.T) {
	t.Run("late ack after judgment is ignored", func(t *testing.T) {
		var e LossEstimator
		e.OnSent(0, 100, 0)
		e.OnSent(1, 100, 0)
		e.OnAck(1)
		if got := e.Update(1000, 50); got != 1 {
			t.Fatalf("loss %v, want 1 (packet 0 judged lost)", got)
		}
		e.OnAck(0) // too late
		e.OnSent(2, 100, 1000)
		if got := e.Update(1000, 50); got != 1 {
			t.Errorf("loss %v after a late ACK, want it unchanged at 1", got)
		}
	})
	t.Run("duplicate acks count once", func(t *testing.T) {
		var e LossEstimator
		for seq := range uint16(10) {
			e.OnSent(seq, 100, 0)
		}
		for range 5 {
			e.OnAckField(9, 0x1ff) // everything
			e.OnAck(3)
		}
		e.OnSent(10, 100, 0)
		if got := e.Update(2000, 50); got != 0 {
			t.Errorf("loss %v, want 0", got)
		}
		if e.totalW != 10 {
			t.Errorf("judged weight %v, want 10 packets", e.totalW)
		}
	})
	t.Run("acks for unknown sequences are ignored", func(t *testing.T) {
		var e LossEstimator
		e.OnAck(5) // nothing sent yet
		e.OnAckField(0, ^uint64(0))
		for seq := uint16(100); seq < 110; seq++ {
			e.OnSent(seq, 100, 0)
		}
		for _, seq := range []uint16{110, 111, 200, 99, 0, 65535, 32768} {
			e.OnAck(seq)
		}
		e.OnAckField(65000, ^uint64(0))
		e.OnAckField(98, ^uint64(0)) // covers 97..34, all before the window
		// With no ACK matching, each packet is judged after AckStallMs.
		if got := e.Update(2000, 50); got != 1 {
			t.Errorf("loss %v, want 1: no ack matched a sent packet", got)
		}
	})
	t.Run("bitfield acknowledges the preceding packets", func(t *testing.T) {
		var e LossEstimator
		for seq := uint16(65530); seq != 10; seq++ { // across the wrap
			e.OnSent(seq, 100, 0)
		}
		// latest 9; bits for 8, 6 and 4 (i = 0, 2, 4) and for 65531 (i = 13).
		e.OnAckField(9, 1|1<<2|1<<4|1<<13)
		e.OnSent(10, 100, 0)
		e.Update(2000, 50)
		// 16 judged (65530..9), 5 acked.
		if e.totalW != 16 || e.lostW != 11 {
			t.Errorf("judged %v lost %v, want 16 and 11", e.totalW, e.lostW)
		}
	})
}

func TestLossSequenceWrap(t *testing.T) {
	// Start just before the wrap and run many wraps with 10% loss: the estimate stays right.
	l := newLink(3, 0.1, 0, 60, 65500)
	sum, n := 0.0, 0
	for tick := range 30000 { // 250 s at 120 Hz, 8 packets a tick: 240000 sends, 3.7 wraps
		l.tick(tickMs(tick, 120), 8)
		if tick > 600 {
			sum += l.lossEstimate
			n++
		}
	}
	if l.sent < 3*65536 {
		t.Fatalf("sent %d packets, want several wraps", l.sent)
	}
	if mean := sum / float64(n); math.Abs(mean-0.1) > 0.01 {
		t.Errorf("mean estimate %.4f across %d wraps, want 0.1", mean, l.sent/65536)
	}
}

func TestLossNonConsecutiveSends(t *testing.T) {
	t.Run("skipped sequences are not judged", func(t *testing.T) {
		var e LossEstimator
		e.OnSent(0, 100, 0)
		e.OnAck(0)
		e.OnSent(10, 100, 0) // 1..9 never sent
		e.OnAck(10)
		e.OnSent(11, 100, 0)
		e.Update(2000, 50)
		if e.totalW != 2 || e.lostW != 0 || e.del.Judged != 2 {
			t.Errorf("judged %v (count %d) lost %v, want 2 received", e.totalW, e.del.Judged, e.lostW)
		}
	})
	t.Run("going back restarts tracking without judging", func(t *testing.T) {
		var e LossEstimator
		for seq := range uint16(50) {
			e.OnSent(seq, 100, 0)
		}
		e.OnSent(20, 100, 0) // a resend of an old number
		if e.count != 1 || e.head != 21 {
			t.Fatalf("count %d head %d, want a restart at 20", e.count, e.head)
		}
		e.OnSent(21, 100, 0)
		if got := e.Update(2000, 50); got != 1 || e.totalW != 1 || e.del.Judged != 1 {
			t.Errorf("loss %v judged %v (count %d), want only the restarted packet judged", got, e.totalW, e.del.Judged)
		}
	})
	t.Run("far jump restarts tracking", func(t *testing.T) {
		var e LossEstimator
		e.OnSent(0, 100, 0)
		e.OnSent(5000, 100, 0)
		if e.count != 1 || e.head != 5001 {
			t.Errorf("count %d head %d, want a restart at 5000", e.count, e.head)
		}
	})
	t.Run("full ring forgets the oldest unjudged", func(t *testing.T) {
		var e LossEstimator
		for seq := range uint16(3 * LossRingSize) {
			e.OnSent(seq, 100, 0)
		}
		if e.count != LossRingSize {
			t.Fatalf("count %d, want %d", e.count, LossRingSize)
		}
		for seq := uint16(2 * LossRingSize); seq < 3*LossRingSize; seq++ {
			e.OnAck(seq)
		}
		e.OnAck(0) // forgotten
		e.OnSent(3*LossRingSize, 100, 0)
		// The last send forgot 2048; of 2049..3072 the newest waits for a successor.
		if got := e.Update(2000, 50); got != 0 || e.totalW != LossRingSize-1 || e.del.Judged != LossRingSize-1 {
			t.Errorf("loss %v judged %v (count %d), want %d packets, all received", got, e.totalW, e.del.Judged, LossRingSize-1)
		}
	})
}

func TestLossForgetsExpiredEvidence(t *testing.T) {
	var e LossEstimator
	e.OnSent(0, 100, 0)
	e.OnSent(1, 100, 0)
	// Nothing is acknowledged: packet 0 is judged lost once packet 1 is older than the horizon
	// plus AckStallMs, 1100 ms.
	if got := e.Update(1100, 50); got != 0 {
		t.Fatalf("loss %v at 1.1 s, want nothing judged yet", got)
	}
	if got := e.Update(1200, 50); got != 1 {
		t.Fatalf("loss %v, want 1", got)
	}
	// Without new judgments the ratio holds while the evidence decays...
	if got := e.Update(2000, 50); got != 1 {
		t.Fatalf("loss %v at 2 s, want 1 (same evidence)", got)
	}
	// ...and returns to "no signal" once its weight is under forgetWeight: ln(1000)*500 ≈ 3454 ms.
	if got := e.Update(4600, 50); got != 1 {
		t.Fatalf("loss %v at 4.6 s, want 1", got)
	}
	if got := e.Update(4700, 50); got != 0 {
		t.Fatalf("loss %v at 4.7 s, want 0", got)
	}
}

func TestLossClockEdgeCases(t *testing.T) {
	var e LossEstimator
	e.OnSent(0, 100, 1000)
	e.OnSent(1, 100, 1000)
	// A clock that goes back judges nothing and decays nothing.
	if got := e.Update(0, 50); got != 0 || e.count != 2 {
		t.Fatalf("loss %v count %d, want nothing judged", got, e.count)
	}
	if got := e.Update(2200, 50); got != 1 {
		t.Fatalf("loss %v, want 1", got)
	}
	// Extreme times and RTTs stay finite.
	for _, now := range []int64{math.MinInt64, -1, 0, math.MaxInt64} {
		for _, rtt := range []uint32{0, 1, math.MaxUint32} {
			e.OnSent(e.head, 100, now)
			got := e.Update(now, rtt)
			if math.IsNaN(got) || got < 0 || got > 1 {
				t.Fatalf("Update(%d, %d) = %v", now, rtt, got)
			}
		}
	}
}

func TestLossNoAllocations(t *testing.T) {
	var e LossEstimator
	seq := uint16(0)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		e.OnSent(seq, 100, now)
		e.OnSent(seq+1, 100, now)
		e.OnAckField(seq, 0xffff_0000_ffff)
		e.OnAck(seq + 1)
		seq += 2
		now += 16
		_ = e.Update(now, 80)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per tick, want 0", allocs)
	}
}

func TestAckRTTSampling(t *testing.T) {
	var e LossEstimator
	if _, ok := e.TakeAckRTT(); ok {
		t.Fatal("a sample before any ACK")
	}
	e.OnSent(0, 100, 1000)
	e.OnSent(1, 100, 1010)
	e.OnSent(2, 100, 1020)
	e.OnAckFieldAt(1, 0b1, 1090)  // packet 1 after 80 ms (and 0 in the field: not sampled)
	e.OnAckFieldAt(2, 0b11, 1080) // packet 2 after 60 ms
	e.OnAckFieldAt(2, 0b11, 1500) // a repeated ACK of 2 is no new sample
	e.OnAckFieldAt(9, 0, 1100)    // never sent
	if ms, ok := e.TakeAckRTT(); !ok || ms != 60 {
		t.Fatalf("TakeAckRTT = %d, %v; want the smallest sample, 60", ms, ok)
	}
	if _, ok := e.TakeAckRTT(); ok {
		t.Fatal("TakeAckRTT did not start a new period")
	}
	// A clock that went backwards gives no sample.
	e.OnSent(3, 100, 2000)
	e.OnAckFieldAt(3, 0, 1990)
	if ms, ok := e.TakeAckRTT(); ok {
		t.Fatalf("sampled %d ms from a clock that went back", ms)
	}
	if got := e.Update(5000, 50); got != 0 {
		t.Errorf("loss %v: OnAckFieldAt must acknowledge like OnAckField", got)
	}
}

// A queue building on the path delays every ACK before ENet's smoothed RTT notices: the
// estimator judges by the latest acknowledgement round trip too, so the late ACKs of a growing
// queue are not read as loss.
func TestLossJudgesByAckRoundTrip(t *testing.T) {
	const enetRTTMs = 5 // ENet's RTT still shows the empty path
	var e LossEstimator
	type ack struct {
		atMs int64
		seq  uint16
	}
	var acks []ack
	seq := uint16(0)
	for tick := range 60 * 4 {
		now := tickMs(tick, 60)
		for len(acks) > 0 && acks[0].atMs <= now {
			e.OnAckFieldAt(acks[0].seq, 0, now)
			acks = acks[1:]
		}
		e.OnSent(seq, 100, now)
		// The queue grows by 1 ms per 8 ms from the first second on, to 250 ms: every ACK is
		// later than the one before, none lost.
		rtt := enetRTTMs + min(max(now-1000, 0)/8, 250)
		acks = append(acks, ack{atMs: now + rtt, seq: seq})
		seq++
		if loss := e.Update(now, enetRTTMs); loss != 0 {
			t.Fatalf("at %d ms (round trip %d ms): loss %v, want 0", now, rtt, loss)
		}
	}
}

func TestDeliveryCount(t *testing.T) {
	var e LossEstimator
	if d := e.Delivered(); d != (Delivery{}) {
		t.Fatalf("a fresh estimator delivered %+v", d)
	}
	for i := range 6 {
		e.OnSent(uint16(i), 100+i, int64(1000+10*i))
	}
	e.OnAckFieldAt(2, 0b11, 1100) // 2, then 1 and 0 from the field
	if want := (Delivery{Bytes: 100 + 101 + 102, AtMs: 1100, SentMs: 1020}); e.Delivered() != want {
		t.Fatalf("after the first ACK: %+v, want %+v", e.Delivered(), want)
	}
	e.OnAckFieldAt(2, 0b11, 1150) // a repeat delivers nothing and moves nothing
	e.OnAckFieldAt(9, 0, 1160)    // never sent
	e.OnAckField(3, 0)            // acknowledged, but with no arrival time: not counted
	if want := (Delivery{Bytes: 303, AtMs: 1100, SentMs: 1020}); e.Delivered() != want {
		t.Fatalf("after repeats: %+v, want %+v", e.Delivered(), want)
	}
	e.OnAckFieldAt(5, 0, 1200)
	e.OnAckFieldAt(5, 0b1, 1210) // fills in packet 4, sent before 5: the newest stays 5
	if want := (Delivery{Bytes: 303 + 105 + 104, AtMs: 1210, SentMs: 1050}); e.Delivered() != want {
		t.Fatalf("after the fill-in: %+v, want %+v", e.Delivered(), want)
	}
	// Sizes are clamped into a uint16.
	e.OnSent(6, 1<<20, 1300)
	e.OnSent(7, -5, 1300)
	e.OnAckFieldAt(7, 0b1, 1400)
	if got := e.Delivered().Bytes; got != 512+65535 {
		t.Errorf("bytes %d, want %d", got, 512+65535)
	}
}
