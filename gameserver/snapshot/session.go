package snapshot

import (
	"errors"
	"math"
	"unsafe"

	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/world"
)

// Priority constants, in units of one tick of full relevance.
const (
	// SpawnPriority is the priority an entity starts with when it enters a session's interest
	// (scaled by its relevance) or leaves it, so spawns and despawns go before updates.
	SpawnPriority = 1 << 20
	// minRelevance is the relevance at the edge of the interest radius.
	minRelevance = 0.25
	// pendingWeight is the priority growth per tick of an unacknowledged spawn or despawn.
	pendingWeight = 4
	// exitFactor: an entity leaves interest only beyond exitFactor * InterestRadius.
	exitFactor = 1.1
)

// Sizes of the fixed rings.
const (
	ringSize  = 256  // sent packets remembered for acknowledgement, a power of two
	arenaSize = 8192 // records of those packets, a power of two
	// lossReorder is how many newer sequences must be acknowledged before an unacknowledged
	// packet counts as lost, as in QUIC's packet threshold.
	lossReorder = 3
	nBuckets    = 128
	noRep       = math.MaxUint16 // slotRep: no replica; a session tracks at most noRep entities
)

// Errors.
var (
	ErrTickBuilt = errors.New("snapshot: a frame was already built for this tick")
	ErrAckFuture = errors.New("snapshot: ACK acknowledges a sequence not sent yet")
)

// replica is what a session knows of one entity (one slot).
type replica struct {
	base        protocol.State // acknowledged baseline, valid when baseTick != 0
	priority    float32
	relevance   float32
	baseTick    uint32 // tick of the baseline; 0: the client has acknowledged no state
	lastSent    uint32 // tick of the last record sent; 0: nothing sent since the entity (re)started
	minPromote  uint32 // acknowledgements of records older than this tick are ignored
	seen        uint32 // last tick the entity was in interest
	despawnTick uint32 // tick the entity left; 0: not leaving
	slot        uint16
	gen         uint16
	sendCount   uint16 // records sent, wrapping
	baseSend    uint16 // sendCount of the baseline's record
	everSent    bool   // the client may hold the entity
}

type sentPacket struct {
	tick               uint32
	start              uint32 // first record in the arena (absolute index)
	count              uint16
	seq                uint16
	valid, acked, lost bool
}

type sentRecord struct {
	slot, gen, sendIdx uint16
	despawn            bool
}

// Stats are a session's cumulative counters.
type Stats struct {
	Frames         uint64 // frames built
	Packets        uint64 // SNAPSHOT packets built
	Bytes          uint64 // bytes of SNAPSHOT packets
	Spawns         uint64 // spawn records
	Deltas         uint64 // delta records
	Despawns       uint64 // despawn records
	PacketsAcked   uint64
	PacketsLost    uint64 // unacknowledged with lossReorder newer packets acknowledged, or evicted
	NeedFull       uint64 // entities the client asked full state for
	Resets         uint64
	Candidates     uint64 // entities that had something to send, summed over frames
	LastCandidates int    // of the last frame
}

// AckResult is what one ACK resolved, for the application-level loss estimator.
type AckResult struct {
	Acked int // packets newly acknowledged
	Lost  int // packets newly counted lost
}

type candidate struct {
	slot   uint16
	bucket uint8
}

// Session is one client's replication state.
type Session struct {
	w       *world.World
	cfg     Config
	focus   world.ID
	reps    []replica
	slotRep []uint16 // slot -> index in reps, noRep when none; 16 bits keep it cache-friendly
	acked   []uint16 // ring indices acknowledged since the last frame, promoted by promote
	hits    []world.Hit
	cands   []candidate
	order   []uint16
	counts  [nBuckets]int32

	ring      [ringSize]sentPacket
	arena     []sentRecord
	arenaHead uint32
	nextSeq   uint16
	lossScan  uint16

	lastBuild    uint32
	lastUpdate   uint32
	rtt          float32 // smoothed round trip, ticks
	clientTick   uint32
	resetPending bool

	enc   protocol.SnapshotEncoder
	stats Stats
}

// NewSession returns a session replicating w under cfg.
func NewSession(w *world.World, cfg Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Session{
		w:       w,
		cfg:     cfg,
		slotRep: make([]uint16, w.Capacity()),
		acked:   make([]uint16, 0, ringSize),
		reps:    make([]replica, 0, 256),
		hits:    make([]world.Hit, 0, 256),
		cands:   make([]candidate, 0, 256),
		order:   make([]uint16, 0, 256),
		arena:   make([]sentRecord, arenaSize),
	}
	s.Recycle()
	return s, nil
}

// Recycle forgets everything about the session's client, keeping the session's memory, so the
// session can serve a new client.
func (s *Session) Recycle() {
	for i := range s.slotRep {
		s.slotRep[i] = noRep
	}
	s.acked = s.acked[:0]
	s.reps = s.reps[:0]
	s.ring = [ringSize]sentPacket{}
	s.arenaHead = 0
	s.nextSeq, s.lossScan = 0, 0
	s.focus = 0
	s.lastBuild, s.lastUpdate, s.clientTick = 0, 0, 0
	s.rtt = float32(s.cfg.TickRateHz) / 10 // 100 ms until measured
	s.resetPending = false
	s.stats = Stats{}
}

// SetConfig changes the session's settings; call it between ticks.
func (s *Session) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.cfg = cfg
	return nil
}

// SetFocus sets the entity whose surroundings the session replicates, normally the session's
// avatar. With no valid focus nothing is in interest.
func (s *Session) SetFocus(id world.ID) { s.focus = id }

// Focus is the focus entity.
func (s *Session) Focus() world.ID { return s.focus }

// Stats returns the cumulative counters.
func (s *Session) Stats() Stats { return s.stats }

// ClientTick is the newest tick the client reported having applied (ACK and PING).
func (s *Session) ClientTick() uint32 { return s.clientTick }

// ReportClientTick records the last applied tick a PING carried.
func (s *Session) ReportClientTick(tick uint32) {
	if tick > s.clientTick && tick <= s.lastBuild {
		s.clientTick = tick
	}
}

// RTTTicks is the smoothed time from sending a packet to its acknowledgement, in ticks.
func (s *Session) RTTTicks() float32 { return s.rtt }

// Known is the number of entities the session tracks for its client.
func (s *Session) Known() int { return len(s.reps) }

// MemoryBytes is the memory the session holds, for state-pool accounting.
func (s *Session) MemoryBytes() int {
	return int(unsafe.Sizeof(*s)) +
		cap(s.reps)*int(unsafe.Sizeof(replica{})) +
		cap(s.slotRep)*2 +
		cap(s.acked)*2 +
		cap(s.hits)*int(unsafe.Sizeof(world.Hit{})) +
		cap(s.cands)*int(unsafe.Sizeof(candidate{})) +
		cap(s.order)*2 +
		cap(s.arena)*int(unsafe.Sizeof(sentRecord{}))
}

// Reset forgets what the client holds. The next frame carries a RESET message and full state
// for everything in interest.
func (s *Session) Reset() {
	for i := range s.reps {
		s.slotRep[s.reps[i].slot] = noRep
	}
	s.reps = s.reps[:0]
	s.acked = s.acked[:0]
	for i := range s.ring {
		s.ring[i].valid = false
	}
	s.lossScan = s.nextSeq
	s.resetPending = true
	s.stats.Resets++
}

// BuildFrame builds the session's frame for the world's current tick into f: packets of at most
// MaxPacketBytes, highest priority first, until budget bytes are used (0: no limit but the
// frame's capacity). nowUnixMs stamps the packets. An idle session gets an empty frame.
func (s *Session) BuildFrame(budget int, nowUnixMs int64, f *Frame) error {
	tick := s.w.Tick()
	if tick == s.lastBuild {
		return ErrTickBuilt
	}
	f.clear(tick)
	var flags uint8
	if s.resetPending {
		s.resetPending = false
		flags = protocol.FlagReset
		f.reset = protocol.AppendReset(f.resetBuf[:0], &protocol.Reset{Tick: tick})
	}
	update := tick-s.lastUpdate >= s.cfg.updateInterval()
	if update {
		s.lastUpdate = tick
	}
	s.gather(tick)
	s.promote()
	s.collect(tick, update)
	s.sortCandidates()
	s.emit(tick, budget, uint32(nowUnixMs), flags, f)
	s.lastBuild = tick
	s.stats.Frames++
	return nil
}

// gather marks the entities in interest, creating replicas for newcomers.
func (s *Session) gather(tick uint32) {
	s.hits = s.hits[:0]
	x, y, _, ok := s.w.Position(s.focus)
	if !ok {
		return
	}
	r := s.cfg.InterestRadius
	r2 := r * r
	inv := (1 - minRelevance) / r2
	s.hits = s.w.Query(x, y, r*exitFactor, s.hits)
	for _, h := range s.hits {
		slot := h.Slot
		gen := s.w.Gen(slot)
		ri := s.slotRep[slot]
		relevance := max(minRelevance, 1-h.Dist2*inv)
		if ri == noRep {
			if h.Dist2 > r2 || len(s.reps) == noRep {
				continue
			}
			ri = s.addReplica(slot)
			s.start(&s.reps[ri], gen, tick, relevance)
		}
		rep := &s.reps[ri]
		if rep.gen != gen || rep.despawnTick != 0 {
			// A new incarnation holds the slot, or the entity is back after leaving: it starts
			// over if it is within the radius; otherwise the old one goes on leaving.
			if h.Dist2 > r2 {
				continue
			}
			s.start(rep, gen, tick, relevance)
		}
		rep.seen = tick
		rep.relevance = relevance
	}
	for _, b := range s.w.Bumps() {
		if ri := s.slotRep[b.Slot]; ri != noRep {
			if rep := &s.reps[ri]; rep.gen == b.Gen && rep.despawnTick == 0 {
				rep.priority += b.Amount
			}
		}
	}
}

func (s *Session) addReplica(slot uint16) uint16 {
	ri := uint16(len(s.reps))
	s.reps = append(s.reps, replica{slot: slot})
	s.slotRep[slot] = ri
	return ri
}

// start makes rep a fresh spawn of incarnation gen. A spawn replaces whatever the client holds
// for the id, so nothing needs to be despawned first.
func (s *Session) start(rep *replica, gen uint16, tick uint32, relevance float32) {
	rep.gen = gen
	rep.despawnTick = 0
	rep.baseTick = 0
	rep.lastSent = 0
	rep.minPromote = tick
	rep.priority = SpawnPriority * relevance
}

func (s *Session) removeReplica(ri uint16) {
	last := uint16(len(s.reps) - 1)
	s.slotRep[s.reps[ri].slot] = noRep
	if ri != last {
		s.reps[ri] = s.reps[last]
		s.slotRep[s.reps[ri].slot] = ri
	}
	s.reps = s.reps[:last]
}

// collect turns entities that left into despawns, grows the priority of every entity with
// something to send, and lists those that may be sent this tick.
func (s *Session) collect(tick uint32, update bool) {
	s.cands = s.cands[:0]
	resend := uint32(s.rtt) + 2
	for i := len(s.reps) - 1; i >= 0; i-- {
		rep := &s.reps[i]
		if rep.despawnTick == 0 && rep.seen != tick {
			if !rep.everSent {
				s.removeReplica(uint16(i)) // the client never heard of it
				continue
			}
			rep.despawnTick = tick
			rep.lastSent = 0
			rep.minPromote = tick
			rep.priority = SpawnPriority
		}
		var weight float32
		var eligible bool
		switch {
		case rep.despawnTick != 0:
			weight = pendingWeight
			eligible = rep.lastSent == 0 || tick-rep.lastSent >= resend
		case rep.baseTick == 0:
			weight = pendingWeight * rep.relevance
			eligible = rep.lastSent == 0 || s.w.Changed(rep.slot) > rep.lastSent || tick-rep.lastSent >= resend
		default:
			changed := s.w.Changed(rep.slot)
			if changed <= rep.baseTick || *s.w.State(rep.slot) == rep.base {
				rep.priority = 0 // the client has it: nothing to send
				continue
			}
			weight = rep.relevance
			eligible = update && (changed > rep.lastSent || tick-rep.lastSent >= resend)
		}
		if !eligible {
			continue
		}
		rep.priority += weight
		s.cands = append(s.cands, candidate{slot: rep.slot, bucket: bucket(rep.priority)})
	}
	s.stats.Candidates += uint64(len(s.cands))
	s.stats.LastCandidates = len(s.cands)
}

// bucket maps a priority to one of nBuckets logarithmic buckets, four per octave, from 2^-3 up.
func bucket(p float32) uint8 {
	const first = (127 - 3) << 2 // exponent -3, in the float32 bits' exponent-and-2-mantissa-bits
	b := int(math.Float32bits(p)>>21) - first
	return uint8(max(0, min(nBuckets-1, b)))
}

// sortCandidates orders the candidates by bucket, highest first (a counting sort).
func (s *Session) sortCandidates() {
	s.counts = [nBuckets]int32{}
	for _, c := range s.cands {
		s.counts[c.bucket]++
	}
	var pos int32
	for b := nBuckets - 1; b >= 0; b-- {
		n := s.counts[b]
		s.counts[b] = pos
		pos += n
	}
	if cap(s.order) < len(s.cands) {
		s.order = make([]uint16, len(s.cands), 2*len(s.cands))
	}
	s.order = s.order[:len(s.cands)]
	for _, c := range s.cands {
		s.order[s.counts[c.bucket]] = c.slot
		s.counts[c.bucket]++
	}
}

// maxMisses is how many records that do not fit the frame's last packet are skipped looking for
// smaller ones before the frame is closed.
const maxMisses = 8

// emit writes the ordered candidates into packets.
func (s *Session) emit(tick uint32, budget int, nowMs uint32, flags uint8, f *Frame) {
	limit := len(f.buf)
	if budget > 0 {
		limit = min(limit, budget)
	}
	off := 0      // start of the open packet
	open := false // a packet is open at off
	last := false // the open packet is the last the budget allows
	misses := 0
	for _, slot := range s.order {
		rep := &s.reps[s.slotRep[slot]]
		for {
			if !open {
				room := min(s.cfg.MaxPacketBytes, limit-off)
				h := protocol.SnapshotHeader{Tick: tick, ServerTimeMs: nowMs, Seq: s.nextSeq, Flags: flags}
				if !s.enc.Begin(f.buf[off:off+room], &h) {
					return
				}
				open = true
				last = limit-off-room < minPacketBytes
			}
			if s.write(rep, tick) {
				break
			}
			// A full packet is closed and the record retried in a new one, unless the budget
			// allows no new one: then smaller records may still fit.
			if last || s.enc.Records() == 0 {
				misses++
				break
			}
			off = s.finish(tick, off, f)
			open = false
		}
		if misses == maxMisses {
			break
		}
	}
	if open {
		s.finish(tick, off, f)
	}
	if n := len(f.ends); n > 0 {
		protocol.SetSnapshotFlags(f.Packet(n-1), protocol.FlagLast)
	}
}

// write encodes one record into the open packet and remembers it; it reports false if the record
// did not fit.
func (s *Session) write(rep *replica, tick uint32) bool {
	slot := rep.slot
	var ok bool
	switch {
	case rep.despawnTick != 0:
		if ok = s.enc.Despawn(slot); ok {
			s.stats.Despawns++
		}
	case rep.baseTick != 0 && tick-rep.baseTick <= protocol.MaxBaselineAge &&
		rep.sendCount-rep.baseSend-1 < protocol.HistoryDepth-1:
		if ok = s.enc.Delta(slot, tick-rep.baseTick, &rep.base, s.w.State(slot)); ok {
			s.stats.Deltas++
		}
	default:
		if ok = s.enc.Spawn(slot, uint8(s.w.KindOf(slot)), s.w.State(slot)); ok {
			s.stats.Spawns++
		}
	}
	if !ok {
		return false
	}
	s.arena[s.arenaHead&(arenaSize-1)] = sentRecord{slot: slot, gen: rep.gen, sendIdx: rep.sendCount, despawn: rep.despawnTick != 0}
	s.arenaHead++
	rep.sendCount++
	rep.lastSent = tick
	rep.priority = 0
	rep.everSent = true
	return true
}

// finish closes the open packet, records it in the ring and returns the next packet's offset.
func (s *Session) finish(tick uint32, off int, f *Frame) int {
	n := s.enc.Records()
	if n == 0 {
		return off
	}
	pkt := s.enc.Finish()
	end := off + len(pkt)
	f.ends = append(f.ends, end)
	seq := s.nextSeq
	e := &s.ring[seq&(ringSize-1)]
	if e.valid && !e.acked && !e.lost {
		s.stats.PacketsLost++ // evicted before it was acknowledged
	}
	*e = sentPacket{tick: tick, start: s.arenaHead - uint32(n), count: uint16(n), seq: seq, valid: true}
	s.nextSeq++
	if uint16(s.nextSeq-s.lossScan) > ringSize {
		s.lossScan = s.nextSeq - ringSize
	}
	s.stats.Packets++
	s.stats.Bytes += uint64(len(pkt))
	return end
}

// HandleAck applies a client's ACK: it promotes the baselines of newly acknowledged packets,
// counts lost packets, honours NeedFull and Resync. It refuses an ACK of a sequence not sent.
func (s *Session) HandleAck(a *protocol.Ack) (AckResult, error) {
	var res AckResult
	if int16(a.Latest-s.nextSeq) >= 0 {
		return res, ErrAckFuture
	}
	s.ReportClientTick(a.LastAppliedTick)
	s.ackPacket(a.Latest, &res)
	for bits, i := a.Received, uint16(1); bits != 0; bits, i = bits>>1, i+1 {
		if bits&1 != 0 {
			s.ackPacket(a.Latest-i, &res)
		}
	}
	for s.lossScan != s.nextSeq && int16(a.Latest-s.lossScan) >= lossReorder {
		if e := &s.ring[s.lossScan&(ringSize-1)]; e.valid && e.seq == s.lossScan && !e.acked && !e.lost {
			e.lost = true
			res.Lost++
		}
		s.lossScan++
	}
	s.stats.PacketsAcked += uint64(res.Acked)
	s.stats.PacketsLost += uint64(res.Lost)
	for _, id := range a.NeedFull() {
		s.needFull(id)
	}
	if a.Resync {
		s.Reset()
	}
	return res, nil
}

func (s *Session) ackPacket(seq uint16, res *AckResult) {
	e := &s.ring[seq&(ringSize-1)]
	if !e.valid || e.seq != seq || e.acked {
		return
	}
	e.acked = true
	res.Acked++
	if !e.lost {
		sample := float32(s.w.Tick() - e.tick)
		s.rtt += (sample - s.rtt) / 8
	}
	s.acked = append(s.acked, seq&(ringSize-1))
}

// promote makes the states of the packets acknowledged since the last frame the baselines of
// their entities. It runs while building the frame, after gather has brought the session's
// replicas into the cache, rather than in HandleAck: walking a packet's records touches replicas
// in priority order, that is at random.
func (s *Session) promote() {
	for _, i := range s.acked {
		s.promotePacket(&s.ring[i])
	}
	s.acked = s.acked[:0]
}

func (s *Session) promotePacket(e *sentPacket) {
	if !e.valid || s.arenaHead-e.start > arenaSize {
		return // reset since, or its records were overwritten: nothing to promote
	}
	for k := e.start; k != e.start+uint32(e.count); k++ {
		rec := &s.arena[k&(arenaSize-1)]
		ri := s.slotRep[rec.slot]
		if ri == noRep {
			continue
		}
		rep := &s.reps[ri]
		if rep.gen != rec.gen || e.tick < rep.minPromote {
			continue
		}
		switch {
		case rec.despawn:
			if rep.despawnTick != 0 {
				s.removeReplica(ri)
			}
		case rep.despawnTick == 0 && e.tick > rep.baseTick:
			if st, ok := s.w.StateAt(rec.slot, e.tick); ok {
				rep.base = *st
				rep.baseTick = e.tick
				rep.baseSend = rec.sendIdx
			}
		}
	}
}

// needFull drops an entity's baseline so that its full state is sent, ignoring
// acknowledgements of records already in flight (the client could not apply them).
func (s *Session) needFull(id uint16) {
	if int(id) >= len(s.slotRep) {
		return
	}
	ri := s.slotRep[id]
	if ri == noRep {
		return
	}
	rep := &s.reps[ri]
	if rep.despawnTick != 0 {
		return
	}
	s.stats.NeedFull++
	rep.baseTick = 0
	rep.lastSent = 0
	rep.minPromote = s.lastBuild + 1
	rep.priority += SpawnPriority
}
