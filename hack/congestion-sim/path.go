package main

import "math/rand/v2"

// Impairment is what a simulated path does to the server's packets while it applies. The zero
// Impairment is a clean path.
type Impairment struct {
	// Loss is the random loss ratio; with LossBurst above 1 it comes in bursts (a two-state
	// Gilbert model whose bad state loses every packet, bursts of LossBurst packets on average,
	// Loss in the long run), else independently per packet.
	Loss      float64 `json:"loss,omitempty"`
	LossBurst float64 `json:"lossBurst,omitempty"`
	// DelayMs is added to the path's one-way delay.
	DelayMs float64 `json:"delayMs,omitempty"`
	// RateBytesPerSec caps the path with a FIFO bottleneck whose queue holds QueueMs; 0 is no
	// cap.
	RateBytesPerSec float64 `json:"rateBytesPerSec,omitempty"`
	QueueMs         float64 `json:"queueMs,omitempty"`
	// PolicerBytesPerSec polices the path: a token bucket of PolicerBurstBytes refilled at this
	// rate drops what it has no tokens for, and queues nothing; 0 is no policer.
	PolicerBytesPerSec float64 `json:"policerBytesPerSec,omitempty"`
	PolicerBurstBytes  float64 `json:"policerBurstBytes,omitempty"`
}

// path is the downstream of one simulated peer: random loss, a policer, a bottleneck and its
// queue, then the propagation delay. Upstream (the client's ACKs) only takes the base delay.
type path struct {
	baseMs float64 // one-way, each direction
	imp    Impairment
	rng    *rand.Rand
	bad    bool    // the Gilbert model's state
	tokens float64 // the policer's
	lastMs float64 // when the policer was last refilled
	freeMs float64 // when the bottleneck has sent what it holds
}

// outcome is what the path did with a packet.
type outcome struct {
	delivered bool
	atMs      float64 // when it reaches the client
	queueMs   float64 // its time in the bottleneck, its own serialization included
	policed   bool    // dropped by the policer
	dropped   bool    // dropped by the bottleneck's full queue
}

// send passes a packet of size bytes, sent at nowMs, down the path. Every random draw happens
// whatever the outcome, so the loss pattern does not depend on the other impairments.
func (p *path) send(nowMs float64, size int) outcome {
	lost := p.lose()
	if r := p.imp.PolicerBytesPerSec; r > 0 {
		p.tokens = min(p.imp.PolicerBurstBytes, p.tokens+(nowMs-p.lastMs)*r/1000)
		p.lastMs = nowMs
		if lost {
			return outcome{}
		}
		if p.tokens < float64(size) {
			return outcome{policed: true}
		}
		p.tokens -= float64(size)
	} else {
		p.lastMs = nowMs
	}
	if lost {
		return outcome{}
	}
	leave := nowMs
	if r := p.imp.RateBytesPerSec; r > 0 {
		leave = max(nowMs, p.freeMs) + float64(size)*1000/r
		if leave-nowMs > p.imp.QueueMs {
			return outcome{dropped: true}
		}
		p.freeMs = leave
	}
	return outcome{delivered: true, atMs: leave + p.baseMs + p.imp.DelayMs, queueMs: leave - nowMs}
}

// pingRTT is the round trip of a small reliable packet sent at nowMs: ENet's pings cross the
// same queue as the snapshots, take no capacity worth counting, and are resent when lost, so
// they always measure the path.
func (p *path) pingRTT(nowMs float64) float64 {
	queue := 0.0
	if p.imp.RateBytesPerSec > 0 {
		queue = max(p.freeMs-nowMs, 0)
	}
	return 2*p.baseMs + p.imp.DelayMs + queue
}

func (p *path) lose() bool {
	u := p.rng.Float64()
	if p.imp.LossBurst <= 1 {
		return u < p.imp.Loss
	}
	// Simple Gilbert: bursts of 1/r packets on average, entered so that p/(p+r) = Loss.
	r := 1 / p.imp.LossBurst
	lost := p.bad
	if p.bad {
		p.bad = u >= r
	} else {
		p.bad = u < p.imp.Loss*r/(1-p.imp.Loss)
	}
	return lost
}

// set switches the path to imp at nowMs; a new policer starts with a full bucket.
func (p *path) set(imp Impairment, nowMs float64) {
	if imp.PolicerBytesPerSec != p.imp.PolicerBytesPerSec {
		p.tokens, p.lastMs = imp.PolicerBurstBytes, nowMs
	}
	p.imp = imp
}
