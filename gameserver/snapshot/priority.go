package snapshot

import (
	"math"
	"slices"
)

// Buckets other than priority buckets, in scratch.bucket.
const (
	notCandidate = 0xff // nothing to send this tick
	dropped      = 0xfe // the client no longer needs the replica: compact frees its position
	other        = 0xfd // classify left the replica to collectOther
)

// bump adds this tick's game-logic bumps to the priorities of the entities they name.
func (v *View) bump() {
	for _, b := range v.e.Bumps() {
		if i, ok := v.index.find(b.Slot); ok {
			if rep := &v.reps[i]; rep.gen == b.Gen && !rep.leaving {
				rep.priority += b.Amount
			}
		}
	}
}

// collect is the one pass over every replica: it applies acknowledgements (promote found them),
// follows entities that leave interest, die or are replaced, grows the priority of every entity
// with something to send and buckets those that may be sent this tick, and marks replicas the
// client no longer needs for compact to drop. State updates go out on update ticks, in the far
// band on updateFar ticks.
//
// An acknowledged record makes its state the replica's baseline, unless the baseline is newer or
// the state has left the store's history; an acknowledged despawn drops the replica. Records
// sent before the replica's current incarnation are ignored.
//
// It runs for every replica of every view every tick. Its loop (classify) handles the common
// case, an entity that stays in interest with an acknowledged baseline, with no calls, so that
// its values stay in registers (a call clobbers them all); it leaves every other replica to a
// second loop (collectOther). The replicas do not depend on one another, so the order they are
// handled in changes nothing.
func (v *View) collect(tick uint32, update, updateFar bool, fx, fy float32, focused bool) {
	p := pass{tick: tick, resend: uint32(v.rtt) + 2, history: v.history, storeAge: v.storeAgeFor(), fx: fx, fy: fy}
	p.r2 = v.cfg.InterestRadius * v.cfg.InterestRadius
	p.exit2 = p.r2 * exitFactor * exitFactor
	p.inv = (1 - minRelevance) / p.r2
	switch {
	case !update:
		p.due2 = -1
	case updateFar || v.cfg.FarRadius == 0 || !focused:
		p.due2 = float32(math.Inf(1))
	default:
		p.due2 = v.cfg.FarRadius * v.cfg.FarRadius
	}
	if !focused {
		p.fx, p.fy = float32(math.Inf(1)), float32(math.Inf(1))
	}
	sc := v.sc
	sc.counts = [nBuckets]int32{}
	n := len(v.reps)
	sc.bucket = slices.Grow(sc.bucket[:0], n)[:n]
	v.removed = false
	if v.classify(&p) {
		for i, b := range sc.bucket[:n] {
			if b == other {
				v.collectOther(&p, i)
			}
		}
	}
}

// storeAgeFor is the age at which this frame copies baselines out of the store's history:
// storeAge, or on a longer round trip the round trip and storeMargin, so that the baselines of
// moving entities, replaced about once a round trip at about its age, are not copied every frame;
// at most half the history, so that a view can still go unbuilt for half of it and keep
// them.
func (v *View) storeAgeFor() uint32 {
	return max(v.storeAge, min(uint32(v.rtt)+storeMargin, v.history/2))
}

// pass holds collect's values for one frame.
type pass struct {
	tick, resend      uint32
	history, storeAge uint32 // the view's history and storeAgeFor
	// Distances are squared, in m², from the focus (fx, fy).
	fx, fy, r2, exit2 float32
	due2              float32 // state updates are due within this distance: none, the near disc or all
	inv               float32 // relevance lost per m² of squared distance
}

// classify handles the replicas of entities alive, of the same incarnation and within the exit
// radius, that are not leaving and have an acknowledged baseline younger than p.storeAge once this
// frame's acknowledgement applies: it applies the acknowledgement, does what eligible does for a
// replica with a baseline, and buckets and counts the candidates. It marks the other replicas
// other, for collectOther, and reports whether there are any.
func (v *View) classify(p *pass) (others bool) {
	sc := v.sc
	n := len(v.reps)
	reps, acked, metas, buckets := v.reps[:n], sc.acked[:n], v.metas, sc.bucket[:n]
	counts := &sc.counts
	for i := range reps {
		rep := &reps[i]
		m := &metas[rep.slot]
		d2 := m.Dist2(p.fx, p.fy)
		if rep.leaving || !m.Alive || m.Gen != rep.gen || d2 > p.exit2 || m.Special {
			buckets[i], others = other, true
			continue
		}
		if a := acked[i]; a != 0 {
			if mt := uint32(a >> 16); mt >= rep.minPromote && mt > rep.baseTick && p.tick-mt < p.history {
				rep.baseTick, rep.clean, rep.baseSend, rep.baseStored = mt, mt, uint16(a), false
			}
		}
		if rep.baseTick == 0 || p.tick-rep.baseTick >= p.storeAge && !rep.baseStored {
			buckets[i], others = other, true // a spawn, or a baseline to store
			continue
		}
		b := uint8(notCandidate)
		if m.Changed <= rep.clean {
			rep.priority = 0
		} else if d2 <= p.due2 && (m.Changed > rep.lastSent || p.tick-rep.lastSent >= p.resend || rep.lastSent == 0) {
			relevance := 1 - d2*p.inv
			if relevance < minRelevance {
				relevance = minRelevance
			}
			rep.priority += relevance
			b = bucket(rep.priority)
			counts[b&(nBuckets-1)]++
		}
		buckets[i] = b
	}
	return others
}

// collectOther handles replica i, one that classify left: every case.
func (v *View) collectOther(p *pass, i int) {
	sc := v.sc
	sc.bucket[i] = notCandidate
	rep := &v.reps[i]
	if rep.hole {
		return
	}
	tick := p.tick
	if a := sc.acked[i]; a != 0 && uint32(a>>16) >= rep.minPromote {
		if rep.leaving {
			v.drop(i) // the client has dropped it
			return
		}
		if mt := uint32(a >> 16); mt > rep.baseTick && tick-mt < v.history {
			rep.baseTick, rep.clean, rep.baseSend, rep.baseStored = mt, mt, uint16(a), false
		}
	}
	if tick-rep.baseTick >= p.storeAge && rep.baseTick != 0 && !rep.baseStored {
		v.storeBaseline(rep, i)
	}
	meta := v.metas[rep.slot]
	d2 := meta.Dist2(p.fx, p.fy)
	if !meta.Alive {
		d2 = float32(math.Inf(1))
	}
	scale := float32(1)
	if meta.Special && meta.Alive {
		// The game's visibility: an entity the audience may not see leaves as if out of range,
		// one relevant wherever it is stays as if at the focus.
		switch vis := &v.vis[rep.slot]; {
		case !vis.Visible(v.player, v.groups):
			d2 = float32(math.Inf(1))
		case vis.Relevant():
			d2, scale = 0, vis.RelevanceScale()
		default:
			scale = vis.RelevanceScale()
		}
	}
	relevance := 1 - d2*p.inv
	if relevance < minRelevance {
		relevance = minRelevance
	}
	relevance *= scale
	if rep.leaving || meta.Gen != rep.gen || !meta.Alive || d2 > p.exit2 {
		if !v.follow(rep, meta, tick, d2 <= p.r2, relevance) {
			v.drop(i)
			return
		}
	}
	if !eligible(rep, meta.Changed, tick, p.due2 >= 0 && d2 <= p.due2, p.resend, relevance) {
		return
	}
	b := bucket(rep.priority)
	sc.bucket[i] = b
	sc.counts[b&(nBuckets-1)]++
}

// eligible grows rep's priority if it has something to send and reports whether it may be sent
// this tick. An entity whose state equals its acknowledged baseline has nothing to send; a
// record that was sent and not acknowledged goes again after about a round trip.
func eligible(rep *replica, changed, tick uint32, update bool, resend uint32, relevance float32) bool {
	due := rep.lastSent == 0 || tick-rep.lastSent >= resend // never sent, or not acknowledged in time
	weight := relevance
	switch {
	case rep.leaving:
		weight = pendingWeight
	case rep.baseTick == 0:
		weight *= pendingWeight
		due = due || changed > rep.lastSent
	case changed <= rep.clean:
		rep.priority = 0
		return false
	default:
		due = update && (due || changed > rep.lastSent)
	}
	if due {
		rep.priority += weight
	}
	return due
}

// bucket maps a priority to one of nBuckets logarithmic buckets, four per octave, from 2^-3 up.
func bucket(p float32) uint8 {
	const first = (127 - 3) << 2 // exponent -3, in the float32 bits' exponent-and-2-mantissa-bits
	b := int(math.Float32bits(p)>>21) - first
	return uint8(max(0, min(nBuckets-1, b)))
}
