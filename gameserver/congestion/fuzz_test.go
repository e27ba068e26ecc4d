package congestion

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzController steps a controller built from arbitrary Params (hand-built and via MakeParams)
// with arbitrary samples — delivery and judgment counts and clocks included —, reconfiguring it
// mid-run, and checks that every output stays finite and in range.
func FuzzController(f *testing.F) {
	f.Add(true, 10.0/60, 0.02, 0.05, 0.7, uint32(6), uint32(6), uint32(40), uint32(32768), uint32(167), 400,
		[]byte{0, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0})
	f.Add(true, math.NaN(), math.Inf(1), math.Inf(-1), math.NaN(), uint32(0), uint32(0), uint32(math.MaxUint32),
		uint32(0), uint32(math.MaxUint32), -1, []byte{0xff, 0xf8, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(false, 0.0, 0.0, 0.0, 0.0, uint32(0), uint32(0), uint32(0), uint32(0), uint32(0), 0, []byte{})
	f.Fuzz(func(t *testing.T, enabled bool, floor, loss, step, dec float64, maxInterval, eval, margin, backlog, drift uint32,
		budgetFloor int, data []byte) {
		hand := Params{
			Enabled: enabled, ThrottleFloor: floor, MaxIntervalTicks: maxInterval, LossThreshold: loss,
			DelayMarginMs: margin, BacklogThresholdBytes: backlog, IncreaseStep: step, DecreaseFactor: dec,
			EvalIntervalTicks: eval, BudgetFloorBytes: budgetFloor, BaselineDriftUsPerTick: drift,
			BaselineHoldTicks: maxInterval, TickRateHz: backlog, MinFrameBytes: budgetFloor,
			LossCeiling: step, LossTestGain: dec, LossRetestTicks: drift,
		}
		made := MakeParams(Knobs{
			Enabled: enabled, TickRateHz: int(maxInterval), MinSendHz: int(eval), LossThresholdPermille: int(margin),
			DelayMarginMs: int(margin), BacklogThresholdBytes: int(backlog), IncreaseStepPermille: int(drift),
			DecreaseFactorPermille: int(int32(drift)), EvalIntervalTicks: int(eval % 16), BudgetFloorBytes: budgetFloor,
			MinFrameBytes: int(int16(margin)), LossCeilingPermille: int(int16(backlog)), LossTestRatePermille: int(int16(drift)),
			LossRetestMs: int(int32(margin)),
		})
		statics := []int{math.MinInt, -1, 0, 1, 64, 400, 2400, budgetFloor, math.MaxInt}
		var c Controller
		c.Reset(hand)
		tick := uint64(0)
		last := uint64(NeverSent)
		var delivered Delivery
		now := uint32(0)
		for i := 0; i+16 <= len(data); i += 16 {
			// The delivery count and the clock move by amounts the bytes give, the count by
			// anything from nothing to a wrap of its times.
			now += uint32(data[i+3]) * 7
			delivered.Bytes += uint64(binary.LittleEndian.Uint16(data[i+8:]))
			delivered.AtMs += uint32(int16(binary.LittleEndian.Uint16(data[i+10:])))
			delivered.SentMs += uint32(int16(binary.LittleEndian.Uint16(data[i+12:])))
			// Judgments: a few packets judged, some lost, now and then a count that goes back.
			judged := uint64(data[i+14] % 16)
			lost := min(uint64(data[i+15]%16), judged)
			delivered.Judged += judged
			delivered.Lost += lost
			delivered.LossRuns += min(lost, uint64(data[i+15]>>4))
			delivered.JudgedSentMs = now - uint32(data[i+14])
			if data[i+15] == 0xff {
				delivered.Judged, delivered.Lost, delivered.LossRuns = 0, 0, 0
			}
			s := Sample{
				LossRatio:             math.Float64frombits(binary.LittleEndian.Uint64(data[i:])),
				RTTMs:                 binary.LittleEndian.Uint32(data[i+8:]),
				ReliableBytesInFlight: binary.LittleEndian.Uint32(data[i+12:]),
				// The acknowledgement round trip reuses bytes: a sample on odd ticks.
				AckRTTMs:     binary.LittleEndian.Uint32(data[i+4:]),
				HaveAckRTT:   data[i+2]&1 == 1,
				Delivered:    delivered,
				NowMs:        now,
				CeilingBound: data[i+2]&2 == 2,
			}
			for range 1 + int(data[i]%8) {
				c.Step(s)
				if c.ShouldSend(tick, last) {
					last = tick
				}
				tick++
			}
			switch data[i+1] % 16 {
			case 0:
				c.SetParams(made)
			case 1:
				c.SetParams(hand)
			}
			checkInvariants(t, &c, statics)
		}
	})
}

// FuzzLossEstimator drives an estimator with an arbitrary sequence of sends, ACKs and updates and
// checks that the loss stays a ratio, the tracked window stays consistent and neither the
// delivery count nor the judged and lost counts ever go back.
func FuzzLossEstimator(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 200})
	f.Add([]byte{0, 0xff, 0xff, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 2, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var e LossEstimator
		now := int64(0)
		seq := uint16(0)
		var delivered, judged, lost uint64
		for i := 0; i+4 <= len(ops); i += 4 {
			arg := binary.LittleEndian.Uint16(ops[i+1:])
			small := ops[i+3]
			switch ops[i] % 6 {
			case 0: // in-order send
				e.OnSent(seq, int(small)*8, now)
				seq++
			case 1: // arbitrary send, of any size
				e.OnSent(arg, int(int16(arg))*int(small), now)
				seq = arg + 1
			case 2: // ack
				e.OnAck(arg)
			case 3: // ack field, timed when small is odd
				if small&1 == 1 {
					e.OnAckFieldAt(arg, uint64(small)*0x0101010101010101, now)
				} else {
					e.OnAckField(arg, uint64(small)*0x0101010101010101)
				}
			case 4: // time passes, possibly backwards
				now += int64(int16(arg)) * int64(small)
			case 5:
				loss := e.Update(now, uint32(arg)*uint32(small))
				if math.IsNaN(loss) || loss < 0 || loss > 1 {
					t.Fatalf("loss %v", loss)
				}
				if ms, ok := e.TakeAckRTT(); ok && ms > math.MaxInt32 {
					t.Fatalf("a round trip of %d ms", ms)
				}
			}
			if e.count < 0 || e.count > LossRingSize {
				t.Fatalf("count %d", e.count)
			}
			if d := e.Delivered().Bytes; d < delivered {
				t.Fatalf("delivered %d bytes after %d", d, delivered)
			} else {
				delivered = d
			}
			if d := e.Delivered(); d.Judged < judged || d.Lost < lost || d.Lost > d.Judged {
				t.Fatalf("judged %d packets (%d lost) after %d (%d lost)", d.Judged, d.Lost, judged, lost)
			} else {
				judged, lost = d.Judged, d.Lost
			}
			if math.IsNaN(e.lostW) || math.IsInf(e.totalW, 0) || e.lostW > e.totalW+1e-9 || e.lostW < 0 {
				t.Fatalf("weights lost %v total %v", e.lostW, e.totalW)
			}
		}
		if l := e.Loss(); math.IsNaN(l) || l < 0 || l > 1 {
			t.Fatalf("loss %v", l)
		}
	})
}
