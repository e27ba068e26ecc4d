package snapshot

import (
	"errors"
	"math"
	"slices"
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
	// scanSlack is the width of the band beyond InterestRadius that a full interest scan watches,
	// as a share of the radius: the scan comes again once the focus and the world's entities
	// together may have moved that far (see gather).
	scanSlack = 1.0 / 32
	// storeAge is the age, in ticks, at which a baseline is copied out of the world's history
	// into the session, on a short round trip (see storeAgeFor). Baselines of moving entities
	// are replaced sooner and never copied; a session can go unbuilt for the rest of the history
	// (56 ticks by default) and keep them.
	storeAge = 8
	// storeMargin is how much older than the round trip, in ticks, a baseline may be before it
	// is copied.
	storeMargin = 4
)

// Sizes of the fixed rings.
const (
	ringSize  = 256  // sent packets remembered for acknowledgement, a power of two
	arenaSize = 8192 // records of those packets, a power of two
	// lossReorder is how many newer sequences must be acknowledged before an unacknowledged
	// packet counts as lost, as in QUIC's packet threshold.
	lossReorder = 3
	nBuckets    = 128
	// maxReplicas bounds the entities one session tracks, so replica indices fit 16 bits.
	maxReplicas = math.MaxUint16
)

// Errors.
var (
	ErrTickBuilt = errors.New("snapshot: a frame was already built for this tick")
	ErrAckFuture = errors.New("snapshot: ACK acknowledges a sequence not sent yet")
)

// replica is what a session knows of one entity (one slot). A replica keeps its position in the
// session's array while its slot is tracked, so the records of sent packets name it by position;
// the position of a slot no longer tracked is a hole until a new replica takes it.
//
// A baseline is named by its tick; its state is read from the world's state history, and copied
// into the session (bases) only once it is older than a round trip and a margin, and at least
// storeAge ticks old (storeAgeFor), which happens to entities at rest. Moving entities, whose
// baselines advance every round trip, so cost no copies.
//
// It is 32 bytes, two to a cache line.
type replica struct {
	priority   float32
	baseTick   uint32 // tick of the baseline; 0: the client has acknowledged no state
	clean      uint32 // last tick the state was known to equal the baseline
	lastSent   uint32 // tick of the last record sent; 0: nothing sent since the entity (re)started
	minPromote uint32 // acknowledgements of records older than this tick are ignored
	slot       uint16
	gen        uint16
	sendCount  uint16 // records sent, wrapping
	baseSend   uint16 // sendCount of the baseline's record
	leaving    bool   // despawning since minPromote: it left interest, died or was replaced
	everSent   bool   // the client may hold the entity
	baseStored bool   // the baseline is in bases rather than read from the world's history
	hole       bool   // no replica: the position is in Session.free (leaving is set too)
}

// Buckets other than priority buckets, in scratch.bucket.
const (
	notCandidate = 0xff // nothing to send this tick
	dropped      = 0xfe // the client no longer needs the replica: compact frees its position
	other        = 0xfd // classify left the replica to collectOther
)

type sentPacket struct {
	tick               uint32
	start              uint32 // first record in the arena (absolute index)
	count              uint16
	seq                uint16
	valid, acked, lost bool
}

// A sent record is its replica's position and, above it, the replica's send count: records of an
// earlier replica at the position, or an earlier incarnation of the slot, are told apart by their
// tick (minPromote), not by a generation.
func sentRecord(pos, sendIdx uint16) uint32 { return uint32(pos) | uint32(sendIdx)<<16 }

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
	// SpawnsDeferred counts spawns left for a later frame by the enter budget
	// (Config.EnterBudgetDivisor), summed over frames; LastDeferred, of the last frame. A
	// deferred spawn is a candidate that was not sent, but not for want of budget.
	SpawnsDeferred uint64
	LastDeferred   int
}

// AckResult is what one ACK resolved, for the application-level loss estimator.
type AckResult struct {
	Acked int // packets newly acknowledged
	Lost  int // packets newly counted lost
}

// A candidate's record is prepared when it is listed: a delta of at most 64 bits, most of a
// frame, as its bits and length, from the world's record cache or encoded into it; a length of 0
// or above 64 marks a record decided when it is emitted.
const (
	recEqual   = 0    // the state equals the baseline: nothing to send after all
	recEncoded = 0xff // a spawn, a despawn or a long delta, encoded when emitted
)

// Session is one client's replication state.
type Session struct {
	w       *world.World
	cache   *recordCache // shared by the world's sessions
	scratch *scratchPool // shared by the world's sessions
	sc      *scratch     // taken from scratch while a frame is built
	cfg     Config
	focus   world.ID

	reps     []replica        // by position, holes included
	bases    []protocol.State // parallel to reps: baselines that aged out of the world history
	free     []uint16         // the holes in reps
	index    slotIndex
	ackQueue []uint16 // ring indices acknowledged since the last frame

	ring [ringSize]sentPacket
	// pending has bit i set while ring[i] holds a packet not acknowledged yet, so that an ACK
	// finds its news without reading the ring entries of the packets it acknowledged before.
	pending   [ringSize / 64]uint64
	arena     []uint32
	arenaHead uint32
	nextSeq   uint16
	lossScan  uint16

	history      uint32 // the world's HistoryTicks
	storeAge     uint32 // storeAge, within the world's history
	lastBuild    uint32
	lastUpdate   uint32
	lastFar      uint32  // tick of the last state update of the far band
	spawnsLeft   int     // spawn records this frame may still carry
	rtt          float32 // smoothed round trip, ticks
	clientTick   uint32
	resetPending bool
	removed      bool // collect dropped replicas, whose positions compact frees
	// Interest between full scans (gather): the slots that may come within the radius before
	// the next scan, and the focus and the world's Reach at the last scan.
	watch        []uint16
	scanX, scanY float32
	scanReach    float64
	scanDue      bool   // the next gather scans in full
	scans        uint64 // full scans
	warmed       uint32 // what promote read ahead, kept so that its loads are not left out

	enc   protocol.SnapshotEncoder
	stats Stats
}

// NewSession returns a session replicating w under cfg.
func NewSession(w *world.World, cfg Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	const initial = 512
	sh := sharedFor(w)
	s := &Session{
		w:        w,
		cache:    sh.records,
		scratch:  &sh.scratch,
		history:  uint32(w.Config().HistoryTicks),
		storeAge: min(storeAge, uint32(w.Config().HistoryTicks)-2),
		cfg:      cfg,
		reps:     make([]replica, 0, initial),
		bases:    make([]protocol.State, 0, initial),
		free:     make([]uint16, 0, initial),
		watch:    make([]uint16, 0, initial/4),
		index:    newSlotIndex(w.Capacity()),
		ackQueue: make([]uint16, 0, ringSize),
		arena:    make([]uint32, arenaSize),
	}
	s.Recycle()
	return s, nil
}

// Recycle forgets everything about the session's client, keeping the session's memory, so the
// session can serve a new client.
func (s *Session) Recycle() {
	s.forget()
	s.arenaHead = 0
	s.nextSeq, s.lossScan = 0, 0
	s.focus = 0
	s.lastBuild, s.lastUpdate, s.lastFar, s.clientTick = 0, 0, 0, 0
	s.rtt = float32(s.cfg.TickRateHz) / 10 // 100 ms until measured
	s.resetPending = false
	s.stats = Stats{}
}

// forget drops every replica and every packet in flight.
func (s *Session) forget() {
	s.scanDue = true
	s.index.clear()
	s.reps = s.reps[:0]
	s.bases = s.bases[:0]
	s.free = s.free[:0]
	s.ackQueue = s.ackQueue[:0]
	for i := range s.ring {
		s.ring[i].valid = false
	}
	s.pending = [ringSize / 64]uint64{}
	s.lossScan = s.nextSeq
}

// SetConfig changes the session's settings; call it between ticks.
func (s *Session) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.cfg = cfg
	s.scanDue = true
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
func (s *Session) Known() int { return len(s.reps) - len(s.free) }

// MemoryBytes is the memory the session holds, for state-pool accounting.
func (s *Session) MemoryBytes() int {
	return int(unsafe.Sizeof(*s)) +
		cap(s.reps)*int(unsafe.Sizeof(replica{})) +
		cap(s.bases)*int(unsafe.Sizeof(protocol.State{})) +
		cap(s.free)*2 + cap(s.watch)*2 + s.index.bytes() +
		cap(s.ackQueue)*2 + cap(s.arena)*4
}

// Reset forgets what the client holds. The next frame carries a RESET message and full state
// for everything in interest.
func (s *Session) Reset() {
	s.forget()
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
	f.firstSeq = s.nextSeq
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
	updateFar := update && tick-s.lastFar >= s.cfg.farInterval()
	if updateFar {
		s.lastFar = tick
	}
	s.sc = s.scratch.get()
	fx, fy, _, focused := s.w.Position(s.focus)
	if focused {
		s.gather(tick, fx, fy)
	} else {
		s.scanDue = true
	}
	s.promote()
	s.bump()
	s.collect(tick, update, updateFar, fx, fy, focused)
	s.list(tick)
	s.emit(tick, budget, uint32(nowUnixMs), flags, f)
	s.compact(tick)
	s.scratch.put(s.sc)
	s.sc = nil
	s.lastBuild = tick
	s.stats.Frames++
	return nil
}

// promote finds, for every replica, the newest of its records in the packets acknowledged since
// the last frame; collect's pass applies them. A record names its replica's position. The
// records come in packet order, not in the replicas' order: noting them in the scratch array,
// which is in the CPU's caches, rather than in the replicas, which are not yet, leaves collect to
// bring each replica in once and in order.
func (s *Session) promote() {
	n := len(s.reps)
	acked := slices.Grow(s.sc.acked[:0], n)[:n]
	s.sc.acked = acked
	clear(acked)
	arena := s.arena[:arenaSize]
	// The records were written a few ticks ago and are out of the CPU's caches. A word of each
	// cache line of them is read first, in a loop of loads that depend on nothing, so that the
	// misses overlap, where the lookups below would take them one at a time.
	var x uint32
	for _, i := range s.ackQueue {
		e := &s.ring[i&(ringSize-1)]
		for k := uint32(0); k < uint32(e.count); k += 64 / 4 {
			x += arena[(e.start+k)&(arenaSize-1)]
		}
	}
	s.warmed = x
	for _, i := range s.ackQueue {
		e := &s.ring[i&(ringSize-1)]
		if !e.valid || s.arenaHead-e.start > arenaSize {
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
	s.ackQueue = s.ackQueue[:0]
}

// gather finds entities within the interest radius that the session does not track yet and adds
// them as spawns, in the holes first.
//
// A full scan queries the world for them within the radius plus a slack band, and watches those
// it finds in the band. Until the focus and the world's entities together may have moved as far
// as the band is wide (the world's Reach bounds the entities), an entity that was beyond the
// band at the scan is still beyond the radius; so between scans gather checks only the watched
// entities, those collect dropped since (drop watches them), and those the world spawned since
// the last build (world.SpawnedSince), however many ticks ago that was. A last build beyond what
// the world's spawn log covers, a new radius, a reset, a build without focus, or more entities to
// check than a scan would read, scans in full. Interest is thus exactly what a scan every tick
// finds, at the cost of a scan every few dozen ticks and a check of a few dozen entities.
func (s *Session) gather(tick uint32, fx, fy float32) {
	r := s.cfg.InterestRadius
	slack := r * scanSlack
	reach := s.w.Reach()
	dx, dy := float64(fx-s.scanX), float64(fy-s.scanY)
	spawned, covered := s.w.SpawnedSince(s.lastBuild)
	if s.scanDue || !covered || reach-s.scanReach+math.Sqrt(dx*dx+dy*dy) >= float64(slack) ||
		len(spawned)+len(s.watch) > len(s.reps) { // a scan reads about as many entities as are tracked
		s.scan(tick, fx, fy, r, slack, reach)
		return
	}
	metas := s.w.Metas()
	band2 := (r + slack) * (r + slack)
	watch := s.watch
	for k := 0; k < len(watch); {
		slot := watch[k]
		m := &metas[slot]
		if m.Alive && !s.index.has(slot) && !s.add(tick, slot, m.Dist2(fx, fy)) {
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
		if m.Alive && !s.index.has(slot) && !s.add(tick, slot, m.Dist2(fx, fy)) && m.Dist2(s.scanX, s.scanY) <= band2 {
			watch = append(watch, slot)
		}
	}
	s.watch = watch
}

// scan is gather's full scan: it adds the new entities within the radius and watches those in the
// band beyond it.
func (s *Session) scan(tick uint32, fx, fy, r, slack float32, reach float64) {
	hits := s.w.QueryNew(fx, fy, r+slack, s.index.bits, s.sc.fresh[:0])
	s.sc.fresh = hits
	s.scanX, s.scanY, s.scanReach, s.scanDue = fx, fy, reach, false
	s.scans++
	s.watch = s.watch[:0]
	for _, h := range hits {
		if !s.add(tick, h.Slot, h.Dist2) {
			s.watch = append(s.watch, h.Slot)
		}
	}
}

// add starts tracking slot, at squared distance d2 from the focus, as a spawn if it is within the
// radius and reports whether it did. When the session tracks maxReplicas entities already, it
// does not, and the next gather scans in full.
func (s *Session) add(tick uint32, slot uint16, d2 float32) bool {
	r2 := s.cfg.InterestRadius * s.cfg.InterestRadius
	if d2 > r2 {
		return false
	}
	if s.Known() >= maxReplicas {
		s.scanDue = true
		return false
	}
	i := len(s.reps)
	if n := len(s.free); n > 0 {
		i = int(s.free[n-1])
		s.free = s.free[:n-1]
	} else {
		s.reps = append(s.reps, replica{})
		s.bases = append(s.bases, protocol.State{})
	}
	s.reps[i] = replica{slot: slot}
	s.start(&s.reps[i], s.w.Gen(slot), tick, max(minRelevance, 1-d2*(1-minRelevance)/r2))
	s.bases[i] = protocol.State{}
	s.index.set(slot, i)
	return true
}

// start makes rep a fresh spawn of incarnation gen. A spawn replaces whatever the client holds
// for the id, so nothing needs to be despawned first.
func (s *Session) start(rep *replica, gen uint16, tick uint32, relevance float32) {
	rep.gen = gen
	rep.leaving = false
	rep.baseTick = 0
	rep.lastSent = 0
	rep.minPromote = tick
	rep.priority = SpawnPriority * relevance
}

// bump adds this tick's game-logic bumps to the priorities of the entities they name.
func (s *Session) bump() {
	for _, b := range s.w.Bumps() {
		if i, ok := s.index.find(b.Slot); ok {
			if rep := &s.reps[i]; rep.gen == b.Gen && !rep.leaving {
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
// the state has left the world's history; an acknowledged despawn drops the replica. Records
// sent before the replica's current incarnation are ignored.
//
// It runs for every replica of every session every tick. Its loop (classify) handles the common
// case, an entity that stays in interest with an acknowledged baseline, with no calls, so that
// its values stay in registers (a call clobbers them all); it leaves every other replica to a
// second loop (collectOther). The replicas do not depend on one another, so the order they are
// handled in changes nothing.
func (s *Session) collect(tick uint32, update, updateFar bool, fx, fy float32, focused bool) {
	p := pass{tick: tick, resend: uint32(s.rtt) + 2, history: s.history, storeAge: s.storeAgeFor(), fx: fx, fy: fy}
	p.r2 = s.cfg.InterestRadius * s.cfg.InterestRadius
	p.exit2 = p.r2 * exitFactor * exitFactor
	p.inv = (1 - minRelevance) / p.r2
	switch {
	case !update:
		p.due2 = -1
	case updateFar || s.cfg.FarRadius == 0 || !focused:
		p.due2 = float32(math.Inf(1))
	default:
		p.due2 = s.cfg.FarRadius * s.cfg.FarRadius
	}
	if !focused {
		p.fx, p.fy = float32(math.Inf(1)), float32(math.Inf(1))
	}
	sc := s.sc
	sc.counts = [nBuckets]int32{}
	n := len(s.reps)
	sc.bucket = slices.Grow(sc.bucket[:0], n)[:n]
	s.removed = false
	if s.classify(&p) {
		for i, b := range sc.bucket[:n] {
			if b == other {
				s.collectOther(&p, i)
			}
		}
	}
}

// storeAgeFor is the age at which this frame copies baselines out of the world's history:
// storeAge, or on a longer round trip the round trip and storeMargin, so that the baselines of
// moving entities, replaced about once a round trip at about its age, are not copied every frame;
// at most half the history, so that a session can still go unbuilt for half of it and keep
// them.
func (s *Session) storeAgeFor() uint32 {
	return max(s.storeAge, min(uint32(s.rtt)+storeMargin, s.history/2))
}

// pass holds collect's values for one frame.
type pass struct {
	tick, resend      uint32
	history, storeAge uint32 // the session's history and storeAgeFor
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
func (s *Session) classify(p *pass) (others bool) {
	sc := s.sc
	n := len(s.reps)
	reps, acked, metas, buckets := s.reps[:n], sc.acked[:n], s.w.Metas(), sc.bucket[:n]
	counts := &sc.counts
	for i := range reps {
		rep := &reps[i]
		m := &metas[rep.slot]
		d2 := m.Dist2(p.fx, p.fy)
		if rep.leaving || !m.Alive || m.Gen != rep.gen || d2 > p.exit2 {
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
func (s *Session) collectOther(p *pass, i int) {
	sc := s.sc
	sc.bucket[i] = notCandidate
	rep := &s.reps[i]
	if rep.hole {
		return
	}
	tick := p.tick
	if a := sc.acked[i]; a != 0 && uint32(a>>16) >= rep.minPromote {
		if rep.leaving {
			s.drop(i) // the client has dropped it
			return
		}
		if mt := uint32(a >> 16); mt > rep.baseTick && tick-mt < s.history {
			rep.baseTick, rep.clean, rep.baseSend, rep.baseStored = mt, mt, uint16(a), false
		}
	}
	if tick-rep.baseTick >= p.storeAge && rep.baseTick != 0 && !rep.baseStored {
		s.storeBaseline(rep, i)
	}
	meta := s.w.Meta(rep.slot)
	d2 := meta.Dist2(p.fx, p.fy)
	if !meta.Alive {
		d2 = float32(math.Inf(1))
	}
	relevance := 1 - d2*p.inv
	if relevance < minRelevance {
		relevance = minRelevance
	}
	if rep.leaving || meta.Gen != rep.gen || !meta.Alive || d2 > p.exit2 {
		if !s.follow(rep, meta, tick, d2 <= p.r2, relevance) {
			s.drop(i)
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

// drop marks replica i for compact to free, and has gather watch its entity.
func (s *Session) drop(i int) {
	s.index.unset(s.reps[i].slot)
	s.watch = append(s.watch, s.reps[i].slot)
	s.sc.bucket[i] = dropped
	s.removed = true
}

// compact frees the positions of the replicas collect dropped, after the frame of tick is built.
// When holes are more than half of the array, it moves the replicas down over them, so that the
// per-tick pass does not visit a mostly empty array; the records in flight of a replica that
// moved name its old position, so their acknowledgements are ignored (minPromote) and its
// baseline waits for a record sent from its new position.
func (s *Session) compact(tick uint32) {
	if !s.removed {
		return
	}
	for i, b := range s.sc.bucket[:len(s.reps)] {
		if b == dropped {
			s.reps[i] = replica{hole: true, leaving: true}
			s.free = append(s.free, uint16(i))
		}
	}
	if len(s.free) < 32 || 2*len(s.free) <= len(s.reps) {
		return
	}
	j := 0
	for i := range s.reps {
		if s.reps[i].hole {
			continue
		}
		if i != j {
			s.reps[j], s.bases[j] = s.reps[i], s.bases[i]
			s.reps[j].minPromote = tick + 1
			s.index.set(s.reps[j].slot, j)
		}
		j++
	}
	s.reps, s.bases, s.free = s.reps[:j], s.bases[:j], s.free[:0]
}

// storeBaseline copies replica i's baseline out of the world's history, or drops it if it aged
// out of the history while the session was not built (full state is sent then).
//
//go:noinline
func (s *Session) storeBaseline(rep *replica, i int) {
	if st, ok := s.w.StateAt(rep.slot, rep.baseTick); ok {
		s.bases[i], rep.baseStored = *st, true
	} else {
		rep.baseTick = 0
	}
}

// follow handles a replica whose entity is not simply still in interest: one back in interest or
// a new incarnation of the slot is spawned; one that left, died or was replaced is despawned,
// or dropped if the client never heard of it, which follow reports with false.
func (s *Session) follow(rep *replica, meta world.SlotMeta, tick uint32, inRadius bool, relevance float32) bool {
	switch {
	case meta.Alive && inRadius:
		s.start(rep, meta.Gen, tick, relevance)
	case !rep.leaving:
		if !rep.everSent {
			s.index.unset(rep.slot)
			return false
		}
		rep.leaving = true
		rep.lastSent = 0
		rep.minPromote = tick
		rep.priority = SpawnPriority
	}
	return true
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

// list orders the candidates by bucket, highest first, with a stable counting sort over the
// counts collect took, and lists their records in that order, so the encoder reads them in turn.
// A delta record comes from the world's record cache, or is encoded here; other records are
// decided when they are emitted.
func (s *Session) list(tick uint32) {
	sc := s.sc
	counts := &sc.counts
	var pos int32
	for b := nBuckets - 1; b >= 0; b-- {
		n := counts[b]
		counts[b] = pos
		pos += n
	}
	n := int(pos)
	s.stats.Candidates += uint64(n)
	s.stats.LastCandidates = n
	sc.cands = slices.Grow(sc.cands[:0], n)[:n]
	sc.candBits = slices.Grow(sc.candBits[:0], n)[:n]
	sc.candLen = slices.Grow(sc.candLen[:0], n)[:n]
	sc.encode = slices.Grow(sc.encode[:0], n)[:n]
	encode := sc.encode[:s.place(tick)]
	// The states to encode deltas between are read first, in a loop of their own: they are in the
	// world's history and most are out of the CPU's caches, and these loads are then in flight
	// together.
	states := slices.Grow(sc.states[:0], 2*len(encode))[:2*len(encode)]
	sc.states = states
	for k, c := range encode {
		ri := sc.cands[c]
		states[2*k], states[2*k+1] = *s.baseline(ri), *s.w.State(s.reps[ri].slot)
	}
	for k, c := range encode {
		s.encodeDelta(c, tick, &states[2*k], &states[2*k+1])
	}
}

// place puts each candidate at its position in the list, then reads the list in order for the
// records: a delta's from the world's record cache if it is there; it lists the positions of the
// deltas to encode in sc.encode and returns how many it listed. Two loops with few values each
// keep them in registers, where one did not.
func (s *Session) place(tick uint32) (encode int) {
	sc := s.sc
	m := len(s.reps)
	buckets, counts, cands := sc.bucket[:m], &sc.counts, sc.cands
	for i, b := range buckets {
		if b < nBuckets {
			c := counts[b]
			counts[b] = c + 1
			cands[c] = uint16(i)
		}
	}
	reps, cache := s.reps[:m], s.cache
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
			candBits[c], candLen[c] = e.bits, uint8(k) // recEqual, or a short delta's length
		} else {
			encodeList[encode] = uint16(c)
			encode++
		}
	}
	return encode
}

// encodeDelta encodes the delta of candidate c from base, its baseline, to cur for the frame of
// tick, offers it to the record cache (unless another session put its own record of the slot
// there this tick), and lists it.
func (s *Session) encodeDelta(c uint16, tick uint32, base, cur *protocol.State) {
	rep := &s.reps[s.sc.cands[c]]
	age := tick - rep.baseTick
	var rec protocol.RecordBits
	if *base != *cur {
		protocol.DeltaRecord(rep.slot, age, base, cur, &rec)
	}
	s.cache.at(rep.slot, age).fill(tick, age, &rec)
	if rec.N > 64 {
		s.sc.candBits[c], s.sc.candLen[c] = 0, recEncoded
		return
	}
	s.sc.candBits[c], s.sc.candLen[c] = rec.W[0], uint8(rec.N)
}

// maxMisses is how many records that do not fit the frame's last packet are skipped looking for
// smaller ones before the frame is closed.
const maxMisses = 8

// emit writes the listed candidates into packets. Runs of short deltas, most of a frame, go to
// the encoder together; other records one by one.
func (s *Session) emit(tick uint32, budget int, nowMs uint32, flags uint8, f *Frame) {
	limit := len(f.buf)
	if budget > 0 {
		limit = min(limit, budget)
	}
	s.spawnsLeft = s.cfg.maxSpawns(limit)
	s.stats.LastDeferred = 0
	off := 0      // start of the open packet
	open := false // a packet is open at off
	last := false // the open packet is the last the budget allows
	misses := 0
	cands, candBits, candLen := s.sc.cands, s.sc.candBits, s.sc.candLen
	for p := 0; p < len(cands) && misses < maxMisses; {
		if !open {
			room := min(s.cfg.MaxPacketBytes, limit-off)
			h := protocol.SnapshotHeader{Tick: tick, ServerTimeMs: nowMs, Seq: s.nextSeq, Flags: flags}
			if !s.enc.Begin(f.buf[off:off+room], &h) {
				return
			}
			open = true
			last = limit-off-room < minPacketBytes
		}
		if candLen[p]-1 < 64 { // a delta of 1 to 64 bits
			wrote := s.enc.AppendBits(candBits[p:], candLen[p:])
			s.sent(cands[p:p+wrote], tick)
			s.stats.Deltas += uint64(wrote)
			if p += wrote; p == len(cands) || candLen[p]-1 >= 64 {
				continue // the run ended at a record of another kind
			}
		} else if s.write(cands[p], candLen[p], tick) != noRoom {
			p++
			continue
		}
		// The record at p did not fit. A full packet is closed and the record retried in a new
		// one, unless the budget allows no new one: then smaller records may still fit.
		if last || s.enc.Records() == 0 {
			misses++
			p++
			continue
		}
		off = s.finish(tick, off, f)
		open = false
	}
	if open {
		s.finish(tick, off, f)
	}
	if n := len(f.ends); n > 0 {
		protocol.SetSnapshotFlags(f.Packet(n-1), protocol.FlagLast)
	}
}

// sent remembers the records of replicas written to the open packet, in the arena's ring: in one
// run, or two where the ring wraps.
func (s *Session) sent(written []uint16, tick uint32) {
	reps := s.reps
	for len(written) > 0 {
		at := s.arenaHead & (arenaSize - 1)
		run := s.arena[at:min(arenaSize, at+uint32(len(written)))]
		for k, ri := range written[:len(run)] {
			rep := &reps[ri]
			run[k] = sentRecord(ri, rep.sendCount)
			rep.sendCount++
			rep.lastSent = tick
			rep.priority = 0
			rep.everSent = true
		}
		s.arenaHead += uint32(len(run))
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
func (s *Session) write(ri uint16, l uint8, tick uint32) int {
	rep := &s.reps[ri]
	slot := rep.slot
	var ok bool
	switch {
	case l == recEqual:
		// It changed and changed back: nothing to send after all.
		rep.clean = tick
		rep.priority = 0
		return written
	case rep.leaving:
		if ok = s.enc.Despawn(slot); ok {
			s.stats.Despawns++
		}
	case rep.baseTick != 0 && tick-rep.baseTick <= protocol.MaxBaselineAge &&
		rep.sendCount-rep.baseSend-1 < protocol.HistoryDepth-1:
		// A delta longer than 64 bits.
		if ok = s.enc.Delta(slot, tick-rep.baseTick, s.baseline(ri), s.w.State(slot)); ok {
			s.stats.Deltas++
		}
	case s.spawnsLeft == 0:
		s.stats.SpawnsDeferred++
		s.stats.LastDeferred++
		return deferred
	default:
		if ok = s.enc.Spawn(slot, uint8(s.w.KindOf(slot)), s.w.State(slot)); ok {
			s.stats.Spawns++
			s.spawnsLeft--
		}
	}
	if !ok {
		return noRoom
	}
	s.sent([]uint16{ri}, tick)
	return written
}

// baseline is the state of replica ri's baseline: collect keeps it in bases once it is
// storeAgeFor old, so a younger one is still in the world's history.
func (s *Session) baseline(ri uint16) *protocol.State {
	if s.reps[ri].baseStored {
		return &s.bases[ri]
	}
	st, _ := s.w.StateAt(s.reps[ri].slot, s.reps[ri].baseTick)
	return st
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
	s.pending[seq&(ringSize-1)>>6] |= 1 << (seq & 63)
	s.nextSeq++
	if s.nextSeq-s.lossScan > ringSize {
		s.lossScan = s.nextSeq - ringSize
	}
	s.stats.Packets++
	s.stats.Bytes += uint64(len(pkt))
	return end
}

// HandleAck applies a client's ACK: newly acknowledged packets have their states promoted to
// baselines at the next frame; unacknowledged ones with lossReorder newer ones acknowledged are
// counted lost; NeedFull and Resync are honoured. It refuses an ACK of a sequence not sent.
func (s *Session) HandleAck(a *protocol.Ack) (AckResult, error) {
	var res AckResult
	if int16(a.Latest-s.nextSeq) >= 0 {
		return res, ErrAckFuture
	}
	s.ReportClientTick(a.LastAppliedTick)
	s.ackPacket(a.Latest, &res)
	for bits, i := a.Received, uint16(1); bits != 0; bits, i = bits>>1, i+1 {
		if seq := a.Latest - i; bits&1 != 0 && s.pending[seq&(ringSize-1)>>6]>>(seq&63)&1 != 0 {
			s.ackPacket(seq, &res)
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
	s.pending[seq&(ringSize-1)>>6] &^= 1 << (seq & 63)
	res.Acked++
	if !e.lost {
		sample := float32(s.w.Tick() - e.tick)
		s.rtt += (sample - s.rtt) / 8
	}
	s.ackQueue = append(s.ackQueue, seq&(ringSize-1))
}

// needFull drops an entity's baseline so that its full state is sent, ignoring
// acknowledgements of records already in flight (the client could not apply them).
func (s *Session) needFull(id uint16) {
	if int(id) >= s.w.Capacity() {
		return
	}
	i, ok := s.index.find(id)
	if !ok || s.reps[i].leaving {
		return
	}
	rep := &s.reps[i]
	s.stats.NeedFull++
	rep.baseTick = 0
	rep.lastSent = 0
	rep.minPromote = s.lastBuild + 1
	rep.priority += SpawnPriority
}
