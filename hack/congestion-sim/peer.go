package main

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/congestion"
	"github.com/netfleet/netfleet/gameserver/pacing"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Budgets are the session's byte budgets, from the netcode config.
type Budgets struct {
	TickRateHz           int
	SnapshotBytesPerTick int
	BytesPerSecond       int
	MaxPacketBytes       int
	MinFrameBytes        int
}

// Link is one simulated peer: its path and what its frames would carry.
type Link struct {
	Kind string `json:"kind"`
	// Seed seeds the link's random draws, its loss and its frames.
	Seed uint64 `json:"seed"`
	// BaseOneWayMs is each direction's delay on the clean path, and AckJitterMs the most a
	// client's ACK waits after the packet arrived (its wake-up; uniform from 0).
	BaseOneWayMs float64 `json:"baseOneWayMs"`
	AckJitterMs  float64 `json:"ackJitterMs"`
	// FrameBytes is what a frame would carry with no budget: the world's changes the peer
	// sees in a tick (each frame varies by a fifth either way).
	FrameBytes int `json:"frameBytes"`
	// Impaired applies over the impairment; from LaterSec into it, Later replaces it (a link
	// whose capacity drops mid-run).
	Impaired Impairment  `json:"impaired"`
	Later    *Impairment `json:"later,omitempty"`
	LaterSec int         `json:"laterSec,omitempty"`
}

// Timeline is a run's phases in whole seconds: clean, impaired, clean again.
type Timeline struct {
	WarmupSec   int `json:"warmupSec"`
	ImpairedSec int `json:"impairedSec"`
	RecoverySec int `json:"recoverySec"`
}

func (t Timeline) total() int { return t.WarmupSec + t.ImpairedSec + t.RecoverySec }

// Second is what one simulated second carried.
type Second struct {
	SentBytes, DeliveredBytes int
	Frames, Packets, Lost     int
	// QueueMs are the bottleneck times of the packets delivered that were sent in the second.
	QueueMs []float64
}

// pendingPacket is a packet on its way to the client, pendingAck an ACK on its way back.
type pendingPacket struct {
	atMs float64
	seq  uint16
}

type pendingAck struct {
	atMs      float64
	latest    uint16
	preceding uint64
}

// simulatePeer runs one peer through the timeline, tick by tick, as a session does: the ACKs
// that arrived are given to the loss estimator, the estimator judges what is due, the controller
// steps with the tick's sample, and when the controller says so a frame is built under the
// budget lever, the pacing rate and the frame ceiling, and sent as packets of at most
// MaxPacketBytes. The client acknowledges every packet when it arrives (protocol.AckState), and
// ENet's smoothed RTT follows its pings across the same path.
func simulatePeer(p congestion.Params, b Budgets, l Link, tl Timeline, seed uint64) []Second {
	var c congestion.Controller
	c.Reset(p)
	var est congestion.LossEstimator
	var client protocol.AckState
	rng := rand.New(rand.NewPCG(seed, 0x6e66))
	demandRng := rand.New(rand.NewPCG(seed, 0xd3d3))
	jitterRng := rand.New(rand.NewPCG(seed, 0x717))
	pt := path{baseMs: l.BaseOneWayMs, rng: rng}

	hz := b.TickRateHz
	tickMs := 1000 / float64(hz)
	pingMs := float64(broadcast.PingInterval.Milliseconds())
	secs := make([]Second, tl.total())
	var toClient []pendingPacket
	var toServer []pendingAck
	rtt := 2 * l.BaseOneWayMs // ENet's smoothed RTT
	lastPing := math.Inf(-1)
	lastSent := uint64(congestion.NeverSent)
	bound := false
	var seq uint16
	impairFrom, impairTo := tl.WarmupSec*hz, (tl.WarmupSec+tl.ImpairedSec)*hz
	for tick := range tl.total() * hz {
		now := float64(tick) * tickMs
		sec := tick / hz
		switch {
		case tick == impairFrom:
			pt.set(l.Impaired, now)
		case l.Later != nil && tick == impairFrom+l.LaterSec*hz:
			pt.set(*l.Later, now)
		case tick == impairTo:
			pt.set(Impairment{}, now)
		}
		if now-lastPing >= pingMs {
			lastPing = now
			rtt += (pt.pingRTT(now) - rtt) / 8
		}
		toClient, toServer = arrive(toClient, toServer, &client, now, l.BaseOneWayMs, l.AckJitterMs, jitterRng)
		toServer = acknowledge(toServer, &est, now)
		lossRatio := est.Update(int64(now), uint32(rtt))
		ackRTT, haveAckRTT := est.TakeAckRTT()
		c.Step(congestion.Sample{LossRatio: lossRatio, RTTMs: uint32(rtt), AckRTTMs: ackRTT, HaveAckRTT: haveAckRTT,
			Delivered: est.Delivered(), NowMs: uint32(now), CeilingBound: bound})
		bound = false
		if !c.ShouldSend(uint64(tick), lastSent) {
			continue
		}
		lastSent = uint64(tick)
		demand := int(float64(l.FrameBytes) * (0.8 + 0.4*demandRng.Float64()))
		budget, byCeiling := frameBudget(&c, b)
		size := min(demand, budget)
		bound = byCeiling && demand > budget
		s := &secs[sec]
		s.Frames++
		for size > 0 {
			n := min(size, b.MaxPacketBytes)
			size -= n
			est.OnSent(seq, n, int64(now))
			s.SentBytes += n
			s.Packets++
			o := pt.send(now, n)
			if o.delivered {
				toClient = append(toClient, pendingPacket{atMs: o.atMs, seq: seq})
				s.DeliveredBytes += n
				s.QueueMs = append(s.QueueMs, o.queueMs)
			} else {
				s.Lost++
			}
			seq++
		}
	}
	return secs
}

// frameBudget is the session's frame budget: the budget lever, what the pacing rate affords a
// send, and the frame ceiling; byCeiling reports that the ceiling set it.
func frameBudget(c *congestion.Controller, b Budgets) (budget int, byCeiling bool) {
	budget = c.EffectiveBudget(b.SnapshotBytesPerTick)
	if budget == 0 {
		budget = math.MaxInt
	}
	rate := pacing.RateFor(b.BytesPerSecond, c.Throttle())
	if r := c.ByteRateCeiling(); r > 0 && (rate == 0 || r < rate) {
		rate = r
	}
	if rate > 0 {
		perSend := int(rate * float64(c.SendIntervalTicks()) / float64(b.TickRateHz))
		budget = min(budget, max(perSend, b.MinFrameBytes))
	}
	if fc := c.FrameCeilingBytes(); fc > 0 && fc <= budget {
		return fc, true
	}
	return budget, false
}

// arrive hands the client, in order of arrival, every packet that reached it by nowMs; each
// receipt sends an ACK back once the client wakes (up to jitterMs later), which then takes the
// one-way delay.
func arrive(toClient []pendingPacket, toServer []pendingAck, client *protocol.AckState, nowMs, upMs, jitterMs float64, rng *rand.Rand) ([]pendingPacket, []pendingAck) {
	slices.SortStableFunc(toClient, func(a, b pendingPacket) int { return cmpFloat(a.atMs, b.atMs) })
	n := 0
	for _, p := range toClient {
		if p.atMs > nowMs {
			break
		}
		client.Receive(p.seq)
		toServer = append(toServer, pendingAck{atMs: p.atMs + jitterMs*rng.Float64() + upMs, latest: client.Latest, preceding: client.Received})
		n++
	}
	return slices.Delete(toClient, 0, n), toServer
}

// acknowledge gives the estimator, in order of arrival and timed by it, every ACK that reached
// the server by nowMs: the server reads ACKs as they arrive, between its ticks.
func acknowledge(toServer []pendingAck, est *congestion.LossEstimator, nowMs float64) []pendingAck {
	slices.SortStableFunc(toServer, func(a, b pendingAck) int { return cmpFloat(a.atMs, b.atMs) })
	n := 0
	for _, a := range toServer {
		if a.atMs > nowMs {
			break
		}
		est.OnAckFieldAt(a.latest, a.preceding, int64(a.atMs))
		n++
	}
	return slices.Delete(toServer, 0, n)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
