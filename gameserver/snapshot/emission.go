package snapshot

import (
	"slices"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// A candidate's record is prepared when it is listed: a delta of at most 128 bits, nearly all of
// a frame, as its bits and length, from the shared record cache or encoded into it; a length of 0
// or recEncoded marks a record decided when it is emitted.
const (
	recEqual   = 0    // the state equals the baseline: nothing to send after all
	recEncoded = 0xff // a spawn, a despawn or a delta over 128 bits, encoded when emitted
)

// list orders the candidates by bucket, highest first, with a stable counting sort over the
// counts collect took, and lists their records in that order, so the encoder reads them in turn.
// A delta record comes from the shared record cache, or is encoded here; other records are
// decided when they are emitted.
func (v *View) list(tick uint32) {
	sc := v.sc
	counts := &sc.counts
	var pos int32
	for b := nBuckets - 1; b >= 0; b-- {
		n := counts[b]
		counts[b] = pos
		pos += n
	}
	n := int(pos)
	v.res.Candidates = n
	sc.cands = slices.Grow(sc.cands[:0], n)[:n]
	sc.candBits = slices.Grow(sc.candBits[:0], n)[:n]
	sc.candLen = slices.Grow(sc.candLen[:0], n)[:n]
	sc.encode = slices.Grow(sc.encode[:0], n)[:n]
	encode := sc.encode[:v.place(tick)]
	// The states to encode deltas between are read first, in a loop of their own: they are in the
	// store's history and most are out of the CPU's caches, and these loads are then in flight
	// together.
	states := slices.Grow(sc.states[:0], 2*len(encode))[:2*len(encode)]
	sc.states = states
	for k, c := range encode {
		ri := sc.cands[c]
		states[2*k], states[2*k+1] = *v.baseline(ri), v.states[v.reps[ri].slot]
	}
	for k, c := range encode {
		v.encodeDelta(c, tick, &states[2*k], &states[2*k+1])
	}
}

// place puts each candidate at its position in the list, then reads the list in order for the
// records: a delta's from the shared record cache if it is there; it lists the positions of the
// deltas to encode in sc.encode and returns how many it listed. Two loops with few values each
// keep them in registers, where one did not.
func (v *View) place(tick uint32) (encode int) {
	sc := v.sc
	m := len(v.reps)
	buckets, counts, cands := sc.bucket[:m], &sc.counts, sc.cands
	for i, b := range buckets {
		if b < nBuckets {
			c := counts[b]
			counts[b] = c + 1
			cands[c] = uint16(i)
		}
	}
	reps, cache := v.reps[:m], v.cache
	candBits, candLen, encodeList := sc.candBits[:len(cands)], sc.candLen[:len(cands)], sc.encode[:len(cands)]
	key := uint64(tick) << (32 - recordLenBits)
	for c, ri := range cands {
		rep := &reps[ri]
		age := tick - rep.baseTick
		if age > protocol.MaxBaselineAge || rep.baseTick == 0 || rep.leaving ||
			rep.sendCount-rep.baseSend-1 >= protocol.HistoryDepth-1 {
			candBits[c], candLen[c] = 0, recEncoded
			continue
		}
		e := cache.at(rep.slot, age)
		if k := e.key.Load(); k>>recordLenBits == key|uint64(age) {
			candBits[c], candLen[c] = e.bits, uint8(k) // recEqual, or the delta's length
		} else {
			encodeList[encode] = uint16(c)
			encode++
		}
	}
	return encode
}

// encodeDelta encodes the delta of candidate c from base, its baseline, to cur for the frame of
// tick, offers it to the record cache (unless another view put its own record of the slot
// there this tick), and lists it.
func (v *View) encodeDelta(c uint16, tick uint32, base, cur *protocol.State) {
	ri := v.sc.cands[c]
	rep := &v.reps[ri]
	age := tick - rep.baseTick
	rec := &v.rec
	rec.N = 0
	if v.stride == 0 {
		if *base != *cur {
			protocol.DeltaRecord(rep.slot, age, base, cur, rec)
		}
	} else if bf, cf := v.baseFieldsOf(ri), v.curFields(rep.slot); *base != *cur || !slices.Equal(bf, cf) {
		v.layout.DeltaRecord(rep.slot, age, uint8(v.kinds[rep.slot]), base, cur, bf, cf, rec)
	}
	if rec.N <= 64 {
		v.cache.at(rep.slot, age).fill(tick, age, rec)
	} else if !v.cache.fillLong(rep.slot, tick, age, rec) {
		v.sc.candBits[c], v.sc.candLen[c] = 0, recEncoded // not in the cache: encoded again when emitted
		return
	}
	v.sc.candBits[c], v.sc.candLen[c] = rec.W[0], uint8(rec.N)
}

// maxMisses is how many records that do not fit the frame's last packet are skipped looking for
// smaller ones before the frame is closed.
const maxMisses = 8

// emit writes the listed candidates into packets. Runs of short deltas, most of a frame, go to
// the encoder together; other records one by one.
func (v *View) emit(tick uint32, budget int, nowMs uint32, flags uint8, f *Frame) {
	limit := len(f.buf)
	if budget > 0 {
		limit = min(limit, budget)
	}
	v.spawnsLeft = v.cfg.maxSpawns(limit, v.spawnBytes)
	minPacket := protocol.MinSnapshotBytes + v.spawnBytes
	if v.hasInput {
		flags |= protocol.FlagInputAck
		minPacket += protocol.InputAckBytes
	}
	off := 0      // start of the open packet
	open := false // a packet is open at off
	last := false // the open packet is the last the budget allows
	misses := 0
	cands, candBits, candLen := v.sc.cands, v.sc.candBits, v.sc.candLen
	for p := 0; p < len(cands) && misses < maxMisses; {
		if !open {
			room := min(v.cfg.MaxPacketBytes, limit-off)
			h := protocol.SnapshotHeader{Tick: tick, ServerTimeMs: nowMs, Seq: v.nextSeq, Flags: flags, InputSeq: v.inputSeq}
			if !v.enc.Begin(f.buf[off:off+room], &h) {
				return
			}
			open = true
			last = limit-off-room < minPacket
		}
		if candLen[p]-1 < 64 { // a delta of 1 to 64 bits
			wrote := v.enc.AppendBits(candBits[p:], candLen[p:])
			v.sent(cands[p:p+wrote], tick)
			v.res.Deltas += wrote
			if p += wrote; p == len(cands) || candLen[p]-1 >= 64 {
				continue // the run ended at a record of another kind
			}
		} else if l := candLen[p]; l > 64 && l <= maxCachedBits {
			rep := &v.reps[cands[p]]
			if v.enc.AppendLong(candBits[p], v.cache.high(rep.slot, tick-rep.baseTick), uint(l)) {
				v.sent(cands[p:p+1], tick)
				v.res.Deltas++
				p++
				continue
			}
		} else if v.write(cands[p], l, tick) != noRoom {
			p++
			continue
		}
		// The record at p did not fit. A full packet is closed and the record retried in a new
		// one, unless the budget allows no new one: then smaller records may still fit.
		if last || v.enc.Records() == 0 {
			misses++
			p++
			continue
		}
		off = v.finish(tick, off, f)
		open = false
	}
	if open {
		off = v.finish(tick, off, f)
	}
	if len(f.ends) == 0 && v.inputAckDue(tick) && limit-off >= minPacket {
		// A packet of no records, for the input acknowledgement alone.
		h := protocol.SnapshotHeader{Tick: tick, ServerTimeMs: nowMs, Seq: v.nextSeq, Flags: flags, InputSeq: v.inputSeq}
		v.enc.Begin(f.buf[off:off+min(v.cfg.MaxPacketBytes, limit-off)], &h)
		v.finishPacket(tick, off, f, 0)
	}
	if n := len(f.ends); n > 0 {
		protocol.SetSnapshotFlags(f.Packet(n-1), protocol.FlagLast)
	}
}

// sent remembers the records of replicas written to the open packet, in the arena's ring: in one
// run, or two where the ring wraps.
func (v *View) sent(written []uint16, tick uint32) {
	reps := v.reps
	for len(written) > 0 {
		at := v.arenaHead & (arenaSize - 1)
		run := v.arena[at:min(arenaSize, at+uint32(len(written)))]
		for k, ri := range written[:len(run)] {
			rep := &reps[ri]
			run[k] = sentRecord(ri, rep.sendCount)
			rep.sendCount++
			rep.lastSent = tick
			rep.priority = 0
			rep.everSent = true
		}
		v.arenaHead += uint32(len(run))
		written = written[len(run):]
	}
}

// What write did with a record.
const (
	written  = iota
	noRoom   // it did not fit the open packet
	deferred // a spawn over the frame's enter budget: it keeps its priority for a later frame
)

// write writes replica ri's record other than a short delta (l is recEqual or recEncoded) into
// the open packet and remembers it.
func (v *View) write(ri uint16, l uint8, tick uint32) int {
	rep := &v.reps[ri]
	slot := rep.slot
	var ok bool
	switch {
	case l == recEqual:
		// It changed and changed back: nothing to send after all.
		rep.clean = tick
		rep.priority = 0
		v.res.Unchanged++
		return written
	case rep.leaving:
		if ok = v.enc.Despawn(slot); ok {
			v.res.Despawns++
		}
	case rep.baseTick != 0 && tick-rep.baseTick <= protocol.MaxBaselineAge &&
		rep.sendCount-rep.baseSend-1 < protocol.HistoryDepth-1:
		// A delta longer than 64 bits.
		if ok = v.enc.Delta(slot, tick-rep.baseTick, uint8(v.kinds[slot]), v.baseline(ri), &v.states[slot],
			v.baseFieldsOf(ri), v.curFields(slot)); ok {
			v.res.Deltas++
		}
	case v.spawnsLeft == 0:
		v.res.Deferred++
		return deferred
	default:
		if ok = v.enc.Spawn(slot, uint8(v.kinds[slot]), &v.states[slot], v.curFields(slot)); ok {
			v.res.Spawns++
			v.spawnsLeft--
		}
	}
	if !ok {
		return noRoom
	}
	v.sent([]uint16{ri}, tick)
	return written
}

// finish closes the open packet, records it in the ring and returns the next packet's offset.
func (v *View) finish(tick uint32, off int, f *Frame) int {
	n := v.enc.Records()
	if n == 0 {
		return off
	}
	return v.finishPacket(tick, off, f, n)
}

// inputAckDue reports whether a frame of no records should still carry the input
// acknowledgement: it changed since a packet last carried it, or no packet that carried it was
// acknowledged within about a round trip.
func (v *View) inputAckDue(tick uint32) bool {
	return v.hasInput && !v.inputConfirmed &&
		(v.inputSentSeq != v.inputSeq || v.inputSentTick == 0 || tick-v.inputSentTick >= uint32(v.rtt)+2)
}

// finishPacket closes the open packet of n records, at off in f, and remembers it in the ring.
func (v *View) finishPacket(tick uint32, off int, f *Frame, n int) int {
	pkt := v.enc.Finish()
	end := off + len(pkt)
	f.ends = append(f.ends, end)
	seq := v.nextSeq
	e := &v.ring[seq&(ringSize-1)]
	if e.valid && !e.acked && !e.lost {
		v.stats.PacketsLost++ // evicted before it was acknowledged
	}
	*e = sentPacket{tick: tick, start: v.arenaHead - uint32(n), count: uint16(n), seq: seq, valid: true,
		inputAck: v.hasInput, inputSeq: v.inputSeq}
	if v.hasInput {
		v.inputSentSeq, v.inputSentTick = v.inputSeq, tick
	}
	v.pending[seq&(ringSize-1)>>6] |= 1 << (seq & 63)
	v.nextSeq++
	if v.nextSeq-v.lossScan > ringSize {
		v.lossScan = v.nextSeq - ringSize
	}
	v.res.Packets++
	v.res.Bytes += len(pkt)
	return end
}
