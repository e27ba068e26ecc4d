package snapshot

import (
	"slices"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// promote finds, for every replica, the newest of its records in the packets acknowledged since
// the last frame; collect's pass applies them. A record names its replica's position. The
// records come in packet order, not in the replicas' order: noting them in the scratch array,
// which is in the CPU's caches, rather than in the replicas, which are not yet, leaves collect to
// bring each replica in once and in order.
func (v *View) promote() {
	n := len(v.reps)
	acked := slices.Grow(v.sc.acked[:0], n)[:n]
	v.sc.acked = acked
	clear(acked)
	arena := v.arena[:arenaSize]
	// The records were written a few ticks ago and are out of the CPU's caches. A word of each
	// cache line of them is read first, in a loop of loads that depend on nothing, so that the
	// misses overlap, where the lookups below would take them one at a time.
	var x uint32
	for _, i := range v.ackQueue {
		e := &v.ring[i&(ringSize-1)]
		for k := uint32(0); k < uint32(e.count); k += 64 / 4 {
			x += arena[(e.start+k)&(arenaSize-1)]
		}
	}
	v.warmed = x
	for _, i := range v.ackQueue {
		e := &v.ring[i&(ringSize-1)]
		if !e.valid || v.arenaHead-e.start > arenaSize {
			continue // reset since, or its records were overwritten: nothing to promote
		}
		mt := uint64(e.tick) << 16
		for k, end := e.start, e.start+uint32(e.count); k != end; k++ {
			rec := arena[k&(arenaSize-1)]
			if r := int(uint16(rec)); r < n {
				acked[r] = max(acked[r], mt|uint64(rec>>16))
			}
		}
	}
	v.ackQueue = v.ackQueue[:0]
}

// HandleAck applies a client's ACK: newly acknowledged packets have their states promoted to
// baselines at the next frame; unacknowledged ones with lossReorder newer ones acknowledged are
// counted lost; NeedFull and Resync are honoured. It refuses an ACK of a sequence not sent.
func (v *View) HandleAck(a *protocol.Ack) (AckResult, error) {
	var res AckResult
	if int16(a.Latest-v.nextSeq) >= 0 {
		return res, ErrAckFuture
	}
	v.ReportClientTick(a.LastAppliedTick)
	v.ackPacket(a.Latest, &res)
	for bits, i := a.Received, uint16(1); bits != 0; bits, i = bits>>1, i+1 {
		if seq := a.Latest - i; bits&1 != 0 && v.pending[seq&(ringSize-1)>>6]>>(seq&63)&1 != 0 {
			v.ackPacket(seq, &res)
		}
	}
	for v.lossScan != v.nextSeq && int16(a.Latest-v.lossScan) >= lossReorder {
		if e := &v.ring[v.lossScan&(ringSize-1)]; e.valid && e.seq == v.lossScan && !e.acked && !e.lost {
			e.lost = true
			res.Lost++
		}
		v.lossScan++
	}
	v.stats.PacketsAcked += uint64(res.Acked)
	v.stats.PacketsLost += uint64(res.Lost)
	for _, id := range a.NeedFull() {
		v.needFull(id)
	}
	if a.Resync {
		v.Reset()
	}
	return res, nil
}

func (v *View) ackPacket(seq uint16, res *AckResult) {
	e := &v.ring[seq&(ringSize-1)]
	if !e.valid || e.seq != seq || e.acked {
		return
	}
	e.acked = true
	if e.inputAck && e.inputSeq == v.inputSeq {
		v.inputConfirmed = true
	}
	v.pending[seq&(ringSize-1)>>6] &^= 1 << (seq & 63)
	res.Acked++
	if !e.lost {
		sample := float32(v.e.Tick() - e.tick)
		v.rtt += (sample - v.rtt) / 8
	}
	v.ackQueue = append(v.ackQueue, seq&(ringSize-1))
}

// needFull drops an entity's baseline so that its full state is sent, ignoring
// acknowledgements of records already in flight (the client could not apply them).
func (v *View) needFull(id uint16) {
	if int(id) >= v.capacity {
		return
	}
	i, ok := v.index.find(id)
	if !ok || v.reps[i].leaving {
		return
	}
	rep := &v.reps[i]
	v.stats.NeedFull++
	rep.baseTick = 0
	rep.lastSent = 0
	rep.minPromote = v.lastBuild + 1
	rep.priority += SpawnPriority
}
