package linkem

import (
	"math/rand/v2"
	"time"
)

// direction names one direction of a client's path.
type direction uint8

const (
	upstream   direction = iota // client -> server
	downstream                  // server -> client
)

func (d direction) String() string {
	if d == upstream {
		return "up"
	}
	return "down"
}

// Random streams, one per kind of decision, so that each decision's pattern depends only on the
// seed, the client, the direction and the packet sequence — never on the other settings.
const (
	streamLoss = iota
	streamDuplicate
	streamReorder
	streamJitter
	numStreams
)

// counters are one direction's packet accounting.
type counters struct {
	packetsIn, bytesIn, packetsOut, bytesOut  uint64
	droppedLoss, droppedPolicer, droppedQueue uint64
	droppedLimit                              uint64
	duplicated, reordered, sendErrors         uint64
}

// link is the impairment model of one direction of one client: pure, no I/O, no clock of its
// own — the caller passes the time in nanoseconds on a monotonic scale. Not safe for concurrent
// use.
type link struct {
	imp Impairment

	// Compiled from imp.
	delay, jitter, reorderDelay, queueNs int64
	queueBytes                           float64
	geP, geR, lossGood, lossBad          float64
	bursty                               bool

	rng [numStreams]*rand.Rand
	bad bool // Gilbert-Elliott state

	linkFree int64 // when the bottleneck finishes sending what it holds
	lastDep  int64 // departure of the last in-order packet; jitter never sends before it
	// tokens is the policer's bucket, in bytes, as of policedAt.
	tokens    float64
	policedAt int64

	c      counters
	qdelay histogram
}

// newLink returns a clean link whose random streams derive from seed, client index and direction.
func newLink(seed uint64, index int, d direction) *link {
	l := &link{}
	for s := range l.rng {
		key := uint64(index)<<8 | uint64(d)<<4 | uint64(s)
		l.rng[s] = rand.New(rand.NewPCG(seed, splitmix64(key)))
	}
	l.setImpairment(Impairment{})
	return l
}

// splitmix64 spreads small stream keys over the whole 64-bit seed space.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func msToNs(ms float64) int64 { return int64(ms * float64(time.Millisecond)) }

// setImpairment switches the model to m (defaults already applied). Queue and ordering state carry
// over, as they would on a real link whose conditions change.
func (l *link) setImpairment(m Impairment) {
	if m.PolicerBytesPerSec != l.imp.PolicerBytesPerSec || m.PolicerBurstBytes != l.imp.PolicerBurstBytes {
		// A new policer starts with a full bucket; policedAt is set by the first packet.
		l.tokens, l.policedAt = float64(m.PolicerBurstBytes), -1
	}
	l.imp = m
	l.delay = msToNs(m.DelayMs)
	l.jitter = msToNs(m.JitterMs)
	l.reorderDelay = msToNs(m.ReorderDelayMs)
	l.queueNs = msToNs(m.QueueMs)
	l.queueBytes = float64(m.QueueBytes)
	switch {
	case m.GilbertElliott != nil:
		ge := m.GilbertElliott
		l.bursty, l.geP, l.geR, l.lossGood, l.lossBad = true, ge.P, ge.R, ge.LossGood, ge.LossBad
	case m.LossBurst > 1:
		// Simple Gilbert: the bad state loses everything, stays for 1/r packets on average, and is
		// entered often enough that the long-run loss is m.Loss: p/(p+r) = loss.
		r := 1 / m.LossBurst
		l.bursty, l.geP, l.geR, l.lossGood, l.lossBad = true, m.Loss*r/(1-m.Loss), r, 0, 1
	default:
		l.bursty = false
	}
	if !l.bursty {
		l.bad = false
	}
}

// lose draws the loss decision for one packet.
func (l *link) lose() bool {
	rng := l.rng[streamLoss]
	if !l.bursty {
		return rng.Float64() < l.imp.Loss
	}
	p := l.lossGood
	if l.bad {
		p = l.lossBad
	}
	lost := rng.Float64() < p
	u := rng.Float64()
	if l.bad {
		l.bad = u >= l.geR
	} else {
		l.bad = u < l.geP
	}
	return lost
}

// admit runs one packet of size bytes arriving at now through the model and returns the departure
// times of the copies to send: none (lost or tail-dropped), one, or two (duplicated).
func (l *link) admit(now int64, size int) (deps [2]int64, n int) {
	l.c.packetsIn++
	l.c.bytesIn += uint64(size)
	// Every stream is drawn once per packet whatever the outcome, to keep streams independent.
	lost := l.lose()
	dup := l.rng[streamDuplicate].Float64() < l.imp.Duplicate
	reorder := l.rng[streamReorder].Float64() < l.imp.Reorder
	var jit int64
	if l.imp.JitterDist == JitterNormal {
		jit = int64(l.rng[streamJitter].NormFloat64() * float64(l.jitter))
	} else {
		jit = int64((2*l.rng[streamJitter].Float64() - 1) * float64(l.jitter))
	}
	if lost {
		l.c.droppedLoss++
		return deps, 0
	}
	copies := 1
	if dup {
		copies = 2
	}
	for c := range copies {
		if !l.police(now, size) {
			l.c.droppedPolicer++
			break
		}
		t, ok := l.bottleneck(now, size)
		if !ok {
			l.c.droppedQueue++
			break // a duplicate is only tried once its original got through
		}
		dep := max(t+l.delay+jit, t)
		if c == 0 && reorder {
			dep += l.reorderDelay
			l.c.reordered++
		} else {
			dep = max(dep, l.lastDep)
			l.lastDep = dep
		}
		if c == 1 {
			l.c.duplicated++
		}
		deps[n] = dep
		n++
	}
	return deps, n
}

// police passes a packet of size bytes arriving at now through the policer: it takes the bytes
// from the bucket, refilled at the policed rate since the last packet, or is refused if they are
// not there. Without a policer every packet passes.
func (l *link) police(now int64, size int) bool {
	rate := l.imp.PolicerBytesPerSec
	if rate <= 0 {
		return true
	}
	if l.policedAt >= 0 && now > l.policedAt {
		l.tokens = min(l.tokens+float64(now-l.policedAt)*float64(rate)/float64(time.Second), float64(l.imp.PolicerBurstBytes))
	}
	l.policedAt = max(now, l.policedAt)
	if l.tokens < float64(size) {
		return false
	}
	l.tokens -= float64(size)
	return true
}

// bottleneck passes a packet through the rate limit: it leaves when the link has sent everything
// ahead of it plus itself. It is tail-dropped if that sojourn, or the backlog in bytes, would
// exceed the queue limit. Without a rate it leaves at once.
func (l *link) bottleneck(now int64, size int) (leave int64, ok bool) {
	rate := l.imp.RateBytesPerSec
	if rate <= 0 {
		l.qdelay.record(0)
		return now, true
	}
	done := max(now, l.linkFree) + int64(size)*int64(time.Second)/rate
	sojourn := done - now
	if l.queueNs > 0 && sojourn > l.queueNs {
		return 0, false
	}
	if l.queueBytes > 0 && float64(sojourn)*float64(rate)/float64(time.Second) > l.queueBytes {
		return 0, false
	}
	l.linkFree = done
	l.qdelay.record(time.Duration(sojourn))
	return done, true
}
