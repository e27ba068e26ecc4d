// Package pacing owns the per-session byte-rate pacer of the game server: one sending rate, in
// bytes per second, that governs a session's reliable and unreliable traffic alike. Reliable data
// is sent while it fits the accrued budget and otherwise waits; unreliable data is sent subject to
// a drop probability set by how far the whole backlog exceeds the budget.
//
// It is pure policy: it imports nothing from netfleet, does no I/O, never reads the clock (time and
// random draws are passed in), and allocates nothing.
package pacing

import "math"

// MaxRate is the highest finite rate a Pacer takes, in bytes per second (1 PB/s); larger rates are
// clamped to it so budget arithmetic stays finite.
const MaxRate = 1e15

// minThrottle is the lowest throttle RateFor scales by, so a positive configured rate never
// becomes 0, which would mean unlimited.
const minThrottle = 0.001

const nanosPerSecond = 1e9

// RateFor returns a session's sending rate: its configured bytes per second scaled by its
// congestion throttle. A configured rate <= 0 is unlimited and returns 0. The throttle is clamped
// into [0.001, 1]; NaN counts as 1, as with no controller.
func RateFor(configuredBytesPerSecond int, throttle float64) float64 {
	if configuredBytesPerSecond <= 0 {
		return 0
	}
	if !(throttle <= 1) { // NaN and anything above 1
		throttle = 1
	}
	return float64(configuredBytesPerSecond) * max(throttle, minThrottle)
}

// Pacer is one session's sending budget, a token bucket refilled at the session's rate. It is a
// value type meant to live inside a session struct; the zero Pacer is unlimited.
//
// A round of sending goes: Refill with the current time, then AdmitReliable for the queued
// reliable messages in order until one is refused (it stays queued and is retried first next
// round), then AdmitUnreliable for each unreliable packet.
//
// The budget carries over between rounds: unspent budget accumulates, capped at one second's
// worth, so budget = min(time since the budget was last empty, 1 s) * rate, as in ENet's unified
// throttle. Sent bytes are always charged, so the budget can go negative (see AdmitReliable and
// AdmitUnreliable); the debt is repaid before anything else is sent, which keeps the long-run
// throughput at the rate.
type Pacer struct {
	rate     float64 // bytes per second; 0 is unlimited
	budget   float64 // bytes
	reserved float64 // bytes of budget a refused reliable message waits for, this round
	lastNs   int64
	anchored bool
}

// SetRate sets the sending rate in bytes per second; 0 means unlimited (everything is admitted).
// Negative, NaN and infinite rates are unlimited too. Going from unlimited to a rate starts with
// a full budget, like a session idle for a second; otherwise the budget is kept, capped at one
// second of the new rate. Time since the last Refill accrues at the rate current at the next
// Refill.
func (p *Pacer) SetRate(bytesPerSecond float64) {
	r := bytesPerSecond
	if !(r > 0) || math.IsInf(r, 1) {
		r = 0
	}
	r = min(r, MaxRate)
	switch {
	case r == 0:
		p.budget = 0
	case p.rate == 0:
		p.budget = r
	default:
		p.budget = min(p.budget, r)
	}
	p.rate, p.reserved = r, min(p.reserved, r)
}

// Rate returns the sending rate in bytes per second; 0 is unlimited.
func (p *Pacer) Rate() float64 { return p.rate }

// Budget returns the bytes that may be sent now; negative while a debt is being repaid. It is 0
// and meaningless when the rate is unlimited.
func (p *Pacer) Budget() float64 { return p.budget }

// Refill starts a round at nowNanos: the budget grows by the time elapsed since the previous
// Refill times the rate, up to one second's worth. The first Refill only anchors the clock; a
// clock that went backwards re-anchors without accrual.
func (p *Pacer) Refill(nowNanos int64) {
	p.reserved = 0
	if !p.anchored || nowNanos <= p.lastNs || p.rate == 0 {
		p.anchored = true
		p.lastNs = nowNanos
		return
	}
	// Elapsed time in float64: int64 subtraction could overflow for extreme clocks.
	elapsed := (float64(nowNanos) - float64(p.lastNs)) / nanosPerSecond
	p.lastNs = nowNanos
	if gain := elapsed * p.rate; gain >= p.rate-p.budget {
		p.budget = p.rate // the one-second cap
	} else {
		p.budget += gain
	}
}

// AdmitReliable reports whether a reliable message of n bytes may be sent now, and charges the
// budget if so. A message that does not fit is refused and must wait (the caller keeps it queued);
// it reserves the budget it waits for, so that unreliable traffic cannot starve it this round.
// A message larger than one second's budget could never fit, so it is admitted once the budget
// is full and the debt it leaves is repaid before anything else is sent.
func (p *Pacer) AdmitReliable(n int) bool {
	if p.rate == 0 || n <= 0 {
		return true
	}
	size := float64(n)
	if size <= p.budget || (size > p.rate && p.budget >= p.rate) {
		p.budget -= size
		p.reserved = 0
		return true
	}
	p.reserved = min(size, p.rate)
	return false
}

// AdmitUnreliable decides whether an unreliable packet of n bytes is sent or dropped, given
// backlog, the bytes still waiting in this round (reliable and unreliable, this packet included),
// and r, a uniform random draw. It charges the budget for a sent packet.
//
// Each packet is dropped with probability max(backlog - budget, 0) / backlog, where budget is
// what a refused reliable message has not reserved: the packet is kept iff r < budget/backlog *
// 2^32. Passing the remaining backlog per packet (the round's total for the first, minus each
// decided packet's bytes) makes the expected bytes sent in the round equal the budget; a packet
// may overdraw it by at most its own size, repaid next round. Unlimited rate or a budget covering
// the backlog sends everything.
func (p *Pacer) AdmitUnreliable(n, backlog int, r uint32) bool {
	if p.rate == 0 || n <= 0 {
		return true
	}
	avail := p.budget - p.reserved
	if avail <= 0 {
		return false
	}
	waiting := float64(max(backlog, n))
	if keep := avail / waiting; keep < 1 && float64(r) >= keep*(1<<32) {
		return false
	}
	p.budget -= float64(n)
	return true
}

// Rand is a small deterministic xorshift32 generator for AdmitUnreliable's draws; not for
// anything that needs unpredictability. The zero Rand is usable.
type Rand struct{ s uint32 }

// randSeed replaces a zero state, the one state xorshift never leaves.
const randSeed = 0x9e3779b9

// NewRand returns a Rand seeded with seed (0 picks a fixed non-zero seed).
func NewRand(seed uint32) Rand { return Rand{s: seed} }

// Uint32 returns the next draw, uniform over [1, 2^32).
func (r *Rand) Uint32() uint32 {
	x := r.s
	if x == 0 {
		x = randSeed
	}
	x ^= x << 13
	x ^= x >> 17
	x ^= x << 5
	r.s = x
	return x
}
