package main

import (
	"math/rand/v2"
	"slices"
)

// The kinds of simulated link. Random-loss links lose packets whatever they are sent; congested
// links carry less than the peer is sent, and sending less is what helps.
const (
	KindRandom       = "random loss"
	KindBursty       = "bursty loss"
	KindCapped       = "capped"
	KindLossyCapped  = "lossy-capped"
	KindPolicer      = "policer"
	KindLightPolicer = "light policer"
	KindDrop         = "capacity drop"
)

// kind is one kind of link and how its links are drawn. A congested link carries at most 0.9 of
// what the peer is sent without the controller, so that sent unthrottled it is over
// congestedMaxShare of what it carries: the measure tells a link backed off from one that is not.
type kind struct {
	name      string
	congested bool
	// draw draws a link's impairment for a peer sent fullRate bytes per second without the
	// controller, over an impairment of impairedSec seconds.
	draw func(rng *rand.Rand, fullRate float64, impairedSec int) (imp Impairment, later *Impairment, laterSec int)
}

// uniform draws from [lo, hi).
func uniform(rng *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }

// delayStep is the delay a random-loss link adds while impaired: none for half of them, else
// 20 to 150 ms (a re-route, or a radio link's own delay).
func delayStep(rng *rand.Rand) float64 {
	if rng.Float64() < 0.5 {
		return 0
	}
	return uniform(rng, 20, 150)
}

var kinds = []kind{
	{name: KindRandom, draw: func(rng *rand.Rand, _ float64, _ int) (Impairment, *Impairment, int) {
		return Impairment{Loss: uniform(rng, 0.01, 0.10), DelayMs: delayStep(rng)}, nil, 0
	}},
	{name: KindBursty, draw: func(rng *rand.Rand, _ float64, _ int) (Impairment, *Impairment, int) {
		return Impairment{Loss: uniform(rng, 0.01, 0.08), LossBurst: uniform(rng, 2, 5), DelayMs: delayStep(rng)}, nil, 0
	}},
	{name: KindCapped, congested: true, draw: func(rng *rand.Rand, full float64, _ int) (Impairment, *Impairment, int) {
		return Impairment{RateBytesPerSec: uniform(rng, 0.3, 0.8) * full, QueueMs: uniform(rng, 50, 300)}, nil, 0
	}},
	{name: KindLossyCapped, congested: true, draw: func(rng *rand.Rand, full float64, _ int) (Impairment, *Impairment, int) {
		return Impairment{Loss: uniform(rng, 0.01, 0.05), RateBytesPerSec: uniform(rng, 0.3, 0.8) * full, QueueMs: uniform(rng, 50, 300)}, nil, 0
	}},
	{name: KindPolicer, congested: true, draw: func(rng *rand.Rand, full float64, _ int) (Impairment, *Impairment, int) {
		r := uniform(rng, 0.3, 0.8) * full
		return Impairment{PolicerBytesPerSec: r, PolicerBurstBytes: max(2400, r*uniform(rng, 0.02, 0.1))}, nil, 0
	}},
	{name: KindLightPolicer, congested: true, draw: func(rng *rand.Rand, full float64, _ int) (Impairment, *Impairment, int) {
		r := uniform(rng, 0.8, 0.9) * full
		return Impairment{PolicerBytesPerSec: r, PolicerBurstBytes: max(2400, r*uniform(rng, 0.02, 0.1))}, nil, 0
	}},
	{name: KindDrop, congested: true, draw: func(rng *rand.Rand, full float64, impairedSec int) (Impairment, *Impairment, int) {
		later := Impairment{RateBytesPerSec: uniform(rng, 0.3, 0.8) * full, QueueMs: uniform(rng, 50, 300)}
		return Impairment{}, &later, impairedSec / 2
	}},
}

// Verdict is one link's run with the controller against the same link without it.
type Verdict struct {
	Link Link `json:"link"`
	// DeliveredShare is the bytes delivered over the impairment with the controller, over those
	// delivered without it.
	DeliveredShare float64 `json:"deliveredShare"`
	// SentShare is, for a congested link, the bytes per second it was sent from
	// congestedSettleSec after its congestion began to the end of the impairment, over the rate
	// its path carries; QueueP95Ms the p95 of its packets' time in the bottleneck then, and
	// LossPct the share of its packets lost then.
	SentShare  float64 `json:"sentShare,omitempty"`
	QueueP95Ms float64 `json:"queueP95Ms"`
	LossPct    float64 `json:"lossPct"`
	// Missed: a random-loss link delivered under randomMinShare of the controller-off bytes (it
	// was backed off), or a congested link was sent over congestedMaxShare of what its path
	// carries (it was not).
	Missed bool `json:"missed"`
	// RecoverySec is how many seconds after the impairment ended the link was delivered at
	// least recoveredShare of the controller-off bytes in every second to the end of the run;
	// the whole healed stretch if it never was.
	RecoverySec int `json:"recoverySec"`
}

// The measures of the verdicts.
const (
	// randomMinShare is the least share of the controller-off deliveries a random-loss link
	// must get over the impairment (the congestion benchmark's target for its lossy clients).
	randomMinShare = 0.85
	// congestedSettleSec is how long a congested link's back-off may take; congestedMaxShare
	// is the most it may be sent after that, relative to what its path carries.
	congestedSettleSec = 2
	congestedMaxShare  = 1.1
	// recoveredShare is the share of the controller-off deliveries a healed link is back at.
	recoveredShare = 0.9
)

// judge measures a link's run with the controller (on) against its run without (off).
func judge(k kind, l Link, tl Timeline, on, off []Second) Verdict {
	v := Verdict{Link: l}
	from, to := tl.WarmupSec, tl.WarmupSec+tl.ImpairedSec
	v.DeliveredShare = share(sum(on, from, to, deliveredBytes), sum(off, from, to, deliveredBytes))
	onset, imp := from, l.Impaired
	if l.Later != nil {
		onset, imp = from+l.LaterSec, *l.Later
	}
	settled := onset + congestedSettleSec
	var queue []float64
	packets, lost := 0, 0
	for s := settled; s < to; s++ {
		queue = append(queue, on[s].QueueMs...)
		packets, lost = packets+on[s].Packets, lost+on[s].Lost
	}
	v.QueueP95Ms = quantile(queue, 0.95)
	v.LossPct = 100 * share(float64(lost), float64(packets))
	if k.congested {
		carries := imp.RateBytesPerSec
		if carries == 0 {
			carries = imp.PolicerBytesPerSec
		}
		v.SentShare = share(sum(on, settled, to, sentBytes)/float64(to-settled), carries)
		v.Missed = v.SentShare > congestedMaxShare
	} else {
		v.Missed = v.DeliveredShare < randomMinShare
	}
	v.RecoverySec = len(on) - to
	for s := len(on) - 1; s >= to; s-- {
		if float64(on[s].DeliveredBytes) < recoveredShare*float64(off[s].DeliveredBytes) {
			break
		}
		v.RecoverySec = s - to
	}
	return v
}

func sentBytes(s Second) int      { return s.SentBytes }
func deliveredBytes(s Second) int { return s.DeliveredBytes }

func sum(secs []Second, from, to int, f func(Second) int) float64 {
	n := 0
	for _, s := range secs[from:to] {
		n += f(s)
	}
	return float64(n)
}

func share(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// quantile is the q quantile of v (sorted in place); 0 for none.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(q*float64(len(v))))]
}
