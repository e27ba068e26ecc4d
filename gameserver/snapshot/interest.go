package snapshot

import (
	"math"
	"slices"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// gather finds entities within the interest radius that the view does not track yet and adds
// them as spawns, in the holes first.
//
// A full scan queries the store for them within the radius plus a slack band, and watches those
// it finds in the band. Until the focus and the store's entities together may have moved as far
// as the band is wide (the store's Reach bounds the entities), an entity that was beyond the
// band at the scan is still beyond the radius; so between scans gather checks only the watched
// entities, those collect dropped since (drop watches them), and those the store spawned since
// the last build (Entities.SpawnedSince), however many ticks ago that was. A last build beyond what
// the store's spawn log covers, a new radius, a reset, a build without focus, or more entities to
// check than a scan would read, scans in full. Interest is thus exactly what a scan every tick
// finds, at the cost of a scan every few dozen ticks and a check of a few dozen entities.
func (v *View) gather(tick uint32, fx, fy float32) {
	r := v.cfg.InterestRadius
	slack := r * scanSlack
	reach := v.e.Reach()
	dx, dy := float64(fx-v.scanX), float64(fy-v.scanY)
	spawned, covered := v.e.SpawnedSince(v.lastBuild)
	if v.scanDue || !covered || reach-v.scanReach+math.Sqrt(dx*dx+dy*dy) >= float64(slack) ||
		len(spawned)+len(v.watch) > len(v.reps) { // a scan reads about as many entities as are tracked
		v.scan(tick, fx, fy, r, slack, reach)
		return
	}
	metas := v.metas
	band2 := (r + slack) * (r + slack)
	watch := v.watch
	for k := 0; k < len(watch); {
		slot := watch[k]
		m := &metas[slot]
		if m.Alive && !v.index.has(slot) && !v.add(tick, slot, m.Dist2(fx, fy)) {
			k++
			continue
		}
		// Tracked now (a drop watches it again), or dead (a new entity in the slot is listed as
		// spawned).
		watch[k] = watch[len(watch)-1]
		watch = watch[:len(watch)-1]
	}
	// A spawn beyond the radius is watched if it is within the band around where the scan was:
	// the bound on motion since the scan covers it from there, whatever the focus did.
	for _, slot := range spawned {
		m := &metas[slot]
		if m.Alive && !v.index.has(slot) && !v.add(tick, slot, m.Dist2(fx, fy)) && m.Dist2(v.scanX, v.scanY) <= band2 {
			watch = append(watch, slot)
		}
	}
	v.watch = watch
}

// scan is gather's full scan: it adds the new entities within the radius and watches those in the
// band beyond it.
func (v *View) scan(tick uint32, fx, fy, r, slack float32, reach float64) {
	hits := v.e.QueryNew(fx, fy, r+slack, v.index.bits, v.sc.fresh[:0])
	v.sc.fresh = hits
	v.scanX, v.scanY, v.scanReach, v.scanDue = fx, fy, reach, false
	v.scans++
	v.watch = v.watch[:0]
	for _, h := range hits {
		if !v.add(tick, h.Slot, h.Dist2) {
			v.watch = append(v.watch, h.Slot)
		}
	}
}

// gatherRelevant adds the entities relevant wherever they are (entity.Visibility) that the view
// does not track yet; they are few, and checked at every build, with or without a focus.
func (v *View) gatherRelevant(tick uint32) {
	for _, slot := range v.e.AlwaysRelevant() {
		if !v.index.has(slot) {
			v.add(tick, slot, 0)
		}
	}
}

// add starts tracking slot, at squared distance d2 from the focus, as a spawn if it is within the
// radius, or relevant wherever it is, and its visibility admits the view's audience; it reports
// whether it did. When the view tracks maxReplicas entities already, it does not, and the next
// gather scans in full.
func (v *View) add(tick uint32, slot uint16, d2 float32) bool {
	r2 := v.cfg.InterestRadius * v.cfg.InterestRadius
	m := &v.metas[slot]
	if d2 > r2 && !m.Special {
		return false
	}
	scale := float32(1)
	if m.Special {
		vis := &v.vis[slot]
		if !vis.Visible(v.player, v.groups) {
			return false
		}
		if vis.Relevant() {
			d2 = 0
		} else if d2 > r2 {
			return false
		}
		scale = vis.RelevanceScale()
	}
	if v.Known() >= maxReplicas {
		v.scanDue = true
		return false
	}
	i := len(v.reps)
	if n := len(v.free); n > 0 {
		i = int(v.free[n-1])
		v.free = v.free[:n-1]
	} else {
		v.reps = append(v.reps, replica{})
		v.bases = append(v.bases, protocol.State{})
		v.baseFields = slices.Grow(v.baseFields, v.stride)[:len(v.baseFields)+v.stride]
	}
	v.reps[i] = replica{slot: slot}
	v.start(&v.reps[i], m.Gen, tick, scale*max(minRelevance, 1-d2*(1-minRelevance)/r2))
	v.bases[i] = protocol.State{}
	v.index.set(slot, i)
	return true
}

// start makes rep a fresh spawn of incarnation gen. A spawn replaces whatever the client holds
// for the id, so nothing needs to be despawned first.
func (v *View) start(rep *replica, gen uint16, tick uint32, relevance float32) {
	rep.gen = gen
	rep.leaving = false
	rep.baseTick = 0
	rep.lastSent = 0
	rep.minPromote = tick
	rep.priority = SpawnPriority * relevance
}

// drop marks replica i for compact to free, and has gather watch its entity.
func (v *View) drop(i int) {
	v.index.unset(v.reps[i].slot)
	v.watch = append(v.watch, v.reps[i].slot)
	v.sc.bucket[i] = dropped
	v.removed = true
}

// follow handles a replica whose entity is not simply still in interest: one back in interest or
// a new incarnation of the slot is spawned; one that left, died or was replaced is despawned,
// or dropped if the client never heard of it, which follow reports with false.
func (v *View) follow(rep *replica, meta entity.SlotMeta, tick uint32, inRadius bool, relevance float32) bool {
	switch {
	case meta.Alive && inRadius:
		v.start(rep, meta.Gen, tick, relevance)
	case !rep.leaving:
		if !rep.everSent {
			v.index.unset(rep.slot)
			return false
		}
		rep.leaving = true
		rep.lastSent = 0
		rep.minPromote = tick
		rep.priority = SpawnPriority
	}
	return true
}
