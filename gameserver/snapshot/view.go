package snapshot

import (
	"errors"
	"math"
	"unsafe"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Priority constants, in units of one tick of full relevance.
const (
	// SpawnPriority is the priority an entity starts with when it enters a view's interest
	// (scaled by its relevance) or leaves it, so spawns and despawns go before updates.
	SpawnPriority = 1 << 20
	// minRelevance is the relevance at the edge of the interest radius.
	minRelevance = 0.25
	// pendingWeight is the priority growth per tick of an unacknowledged spawn or despawn.
	pendingWeight = 4
	// exitFactor: an entity leaves interest only beyond exitFactor * InterestRadius.
	exitFactor = 1.1
	// scanSlack is the width of the band beyond InterestRadius that a full interest scan watches,
	// as a share of the radius: the scan comes again once the focus and the store's entities
	// together may have moved that far (see gather).
	scanSlack = 1.0 / 32
	// storeAge is the age, in ticks, at which a baseline is copied out of the store's history
	// into the view, on a short round trip (see storeAgeFor). Baselines of moving entities
	// are replaced sooner and never copied; a view can go unbuilt for the rest of the history
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
	// maxReplicas bounds the entities one view tracks, so replica indices fit 16 bits.
	maxReplicas = math.MaxUint16
)

// Errors.
var (
	ErrTickBuilt = errors.New("snapshot: a frame was already built for this tick")
	ErrAckFuture = errors.New("snapshot: ACK acknowledges a sequence not sent yet")
)

// replica is what a view knows of one entity (one slot). A replica keeps its position in the
// view's array while its slot is tracked, so the records of sent packets name it by position;
// the position of a slot no longer tracked is a hole until a new replica takes it.
//
// A baseline is named by its tick; its state is read from the store's state history, and copied
// into the view (bases) only once it is older than a round trip and a margin, and at least
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
	baseStored bool   // the baseline is in bases rather than read from the store's history
	hole       bool   // no replica: the position is in View.free (leaving is set too)
}

type sentPacket struct {
	tick               uint32
	start              uint32 // first record in the arena (absolute index)
	count              uint16
	seq                uint16
	valid, acked, lost bool
	// The input acknowledgement the packet carried (protocol.FlagInputAck), if inputAck.
	inputAck bool
	inputSeq uint16
}

// A sent record is its replica's position and, above it, the replica's send count: records of an
// earlier replica at the position, or an earlier incarnation of the slot, are told apart by their
// tick (minPromote), not by a generation.
func sentRecord(pos, sendIdx uint16) uint32 { return uint32(pos) | uint32(sendIdx)<<16 }

// View is one client's replication state: what the client holds of the entity store, its
// acknowledged baselines and the packets in flight to it.
type View struct {
	e        Entities
	capacity int          // the store's
	cache    *recordCache // shared with the other views of the store
	scratch  *scratchPool // shared with the other views of the store
	sc       *scratch     // taken from scratch while a frame is built
	cfg      Config
	focus    entity.ID
	// The audience: the player the view is for and its groups (entity.Visibility).
	player int
	groups uint64
	// The newest of the client's inputs the game applied, for the packets' header; whether a
	// packet that carried it was acknowledged, and when one last went out. Until one is
	// acknowledged, a frame with no record carries it in a packet of no records, every round
	// trip, so a client predicting its own moves learns that they were applied even when they
	// changed nothing.
	inputSeq       uint16
	hasInput       bool
	inputConfirmed bool
	inputSentSeq   uint16
	inputSentTick  uint32
	// The store's schema: its layout, the field words a slot, and the size of its largest spawn.
	layout     *protocol.Layout
	stride     int
	spawnBytes int
	rec        protocol.RecordBits // the delta being encoded for the record cache
	// What a build reads of the store, fetched at its start.
	metas     []entity.SlotMeta
	states    []protocol.State
	kinds     []entity.Kind
	hist      []protocol.State
	fields    []uint32
	fieldHist []uint32
	vis       []entity.Visibility
	now       uint32      // the tick being built
	res       FrameResult // of the frame being built

	reps       []replica        // by position, holes included
	bases      []protocol.State // parallel to reps: baselines that aged out of the store's history
	baseFields []uint32         // stride words per position of reps: the fields of those baselines
	free       []uint16         // the holes in reps
	index      slotIndex
	ackQueue   []uint16 // ring indices acknowledged since the last frame

	ring [ringSize]sentPacket
	// pending has bit i set while ring[i] holds a packet not acknowledged yet, so that an ACK
	// finds its news without reading the ring entries of the packets it acknowledged before.
	pending   [ringSize / 64]uint64
	arena     []uint32
	arenaHead uint32
	nextSeq   uint16
	lossScan  uint16

	history      uint32 // the store's HistoryTicks
	storeAge     uint32 // storeAge, within the store's history
	lastBuild    uint32
	lastUpdate   uint32
	lastFar      uint32  // tick of the last state update of the far band
	spawnsLeft   int     // spawn records this frame may still carry
	rtt          float32 // smoothed round trip, ticks
	clientTick   uint32
	resetPending bool
	removed      bool // collect dropped replicas, whose positions compact frees
	// Interest between full scans (gather): the slots that may come within the radius before
	// the next scan, and the focus and the store's Reach at the last scan.
	watch        []uint16
	scanX, scanY float32
	scanReach    float64
	scanDue      bool   // the next gather scans in full
	scans        uint64 // full scans
	warmed       uint32 // what promote read ahead, kept so that its loads are not left out

	enc   protocol.SnapshotEncoder
	stats Stats
}

// ErrSharedCapacity is returned by NewView for a Shared made for another capacity than the
// store's.
var ErrSharedCapacity = errors.New("snapshot: the Shared state was made for another store capacity")

// NewView returns a view replicating e under cfg. sh is what the views of e share (NewShared);
// the server loop makes one per store.
func NewView(e Entities, sh *Shared, cfg Config) (*View, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sh.records.slots != e.Capacity() {
		return nil, ErrSharedCapacity
	}
	const initial = 512
	l := e.Layout()
	v := &View{
		e:          e,
		layout:     l,
		stride:     l.Stride(),
		spawnBytes: (l.MaxSpawnBits() + 7) / 8,
		capacity:   e.Capacity(),
		cache:      sh.records,
		scratch:    &sh.scratch,
		history:    uint32(e.HistoryTicks()),
		storeAge:   min(storeAge, uint32(e.HistoryTicks())-2),
		cfg:        cfg,
		reps:       make([]replica, 0, initial),
		bases:      make([]protocol.State, 0, initial),
		free:       make([]uint16, 0, initial),
		watch:      make([]uint16, 0, initial/4),
		index:      newSlotIndex(e.Capacity()),
		ackQueue:   make([]uint16, 0, ringSize),
		arena:      make([]uint32, arenaSize),
	}
	v.enc.SetLayout(l)
	v.Recycle()
	return v, nil
}

// Recycle forgets everything about the view's client, keeping the view's memory, so the
// view can serve a new client.
func (v *View) Recycle() {
	v.forget()
	v.arenaHead = 0
	v.nextSeq, v.lossScan = 0, 0
	v.focus = 0
	v.player, v.groups, v.inputSeq, v.hasInput = 0, 0, 0, false
	v.inputConfirmed, v.inputSentSeq, v.inputSentTick = false, 0, 0
	v.lastBuild, v.lastUpdate, v.lastFar, v.clientTick = 0, 0, 0, 0
	v.rtt = float32(v.cfg.TickRateHz) / 10 // 100 ms until measured
	v.resetPending = false
	v.stats = Stats{}
}

// forget drops every replica and every packet in flight.
func (v *View) forget() {
	v.scanDue = true
	v.index.clear()
	v.reps = v.reps[:0]
	v.bases = v.bases[:0]
	v.baseFields = v.baseFields[:0]
	v.free = v.free[:0]
	v.ackQueue = v.ackQueue[:0]
	for i := range v.ring {
		v.ring[i].valid = false
	}
	v.pending = [ringSize / 64]uint64{}
	v.lossScan = v.nextSeq
}

// SetConfig changes the view's settings; call it between ticks.
func (v *View) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	v.cfg = cfg
	v.scanDue = true
	return nil
}

// SetFocus sets the entity whose surroundings the view replicates, normally the view's
// avatar. With no valid focus nothing is in interest but the entities relevant wherever they are.
func (v *View) SetFocus(id entity.ID) { v.focus = id }

// SetAudience says whom the view is for: the player in slot, in groups. It sees the entities
// whose entity.Visibility admits them, from the next frame on.
func (v *View) SetAudience(slot int, groups uint64) {
	if slot != v.player || groups != v.groups {
		v.player, v.groups = slot, groups
		v.scanDue = true
	}
}

// AckInput makes the view's packets tell the client that the game has applied its inputs up to
// the one of sequence seq (protocol.FlagInputAck).
func (v *View) AckInput(seq uint16) {
	if !v.hasInput || seq != v.inputSeq {
		v.inputConfirmed = false
	}
	v.inputSeq, v.hasInput = seq, true
}

// Focus is the focus entity.
func (v *View) Focus() entity.ID { return v.focus }

// Stats returns the cumulative counters.
func (v *View) Stats() Stats { return v.stats }

// ClientTick is the newest tick the client reported having applied (ACK and PING).
func (v *View) ClientTick() uint32 { return v.clientTick }

// ReportClientTick records the last applied tick a PING carried.
func (v *View) ReportClientTick(tick uint32) {
	if tick > v.clientTick && tick <= v.lastBuild {
		v.clientTick = tick
	}
}

// RTTTicks is the smoothed time from sending a packet to its acknowledgement, in ticks.
func (v *View) RTTTicks() float32 { return v.rtt }

// Known is the number of entities the view tracks for its client.
func (v *View) Known() int { return len(v.reps) - len(v.free) }

// MemoryBytes is the memory the view holds, for state-pool accounting.
func (v *View) MemoryBytes() int {
	return int(unsafe.Sizeof(*v)) +
		cap(v.reps)*int(unsafe.Sizeof(replica{})) +
		cap(v.bases)*int(unsafe.Sizeof(protocol.State{})) + cap(v.baseFields)*4 +
		cap(v.free)*2 + cap(v.watch)*2 + v.index.bytes() +
		cap(v.ackQueue)*2 + cap(v.arena)*4
}

// Reset forgets what the client holds. The next frame carries a RESET message and full state
// for everything in interest.
func (v *View) Reset() {
	v.forget()
	v.resetPending = true
	v.stats.Resets++
}

// BuildFrame builds the view's frame for the store's current tick into f: packets of at most
// MaxPacketBytes, highest priority first, until budget bytes are used (0: no limit but the
// frame's capacity). nowUnixMs stamps the packets. An idle view gets an empty frame. It returns
// what the frame holds.
func (v *View) BuildFrame(budget int, nowUnixMs int64, f *Frame) (FrameResult, error) {
	tick := v.e.Tick()
	if tick == v.lastBuild {
		return FrameResult{}, ErrTickBuilt
	}
	v.now = tick
	v.metas, v.states, v.kinds, v.hist = v.e.Metas(), v.e.States(), v.e.Kinds(), v.e.History()
	if v.stride > 0 {
		v.fields, v.fieldHist = v.e.Fields(), v.e.FieldHistory()
	}
	v.vis = v.e.Visibilities()
	v.res = FrameResult{}
	f.clear(tick)
	f.firstSeq = v.nextSeq
	var flags uint8
	if v.resetPending {
		v.resetPending = false
		flags = protocol.FlagReset
		f.reset = protocol.AppendReset(f.resetBuf[:0], &protocol.Reset{Tick: tick})
	}
	update := tick-v.lastUpdate >= v.cfg.updateInterval()
	if update {
		v.lastUpdate = tick
	}
	updateFar := update && tick-v.lastFar >= v.cfg.farInterval()
	if updateFar {
		v.lastFar = tick
	}
	v.sc = v.scratch.get()
	fx, fy, focused := v.focusAt()
	if focused {
		v.gather(tick, fx, fy)
	} else {
		v.scanDue = true
	}
	v.gatherRelevant(tick)
	v.promote()
	v.bump()
	v.collect(tick, update, updateFar, fx, fy, focused)
	v.list(tick)
	v.emit(tick, budget, uint32(nowUnixMs), flags, f)
	v.compact(tick)
	v.scratch.put(v.sc)
	v.sc = nil
	v.lastBuild = tick
	v.stats.add(&v.res)
	return v.res, nil
}

// focusAt is the position of the focus entity, if it is alive.
func (v *View) focusAt() (x, y float32, ok bool) {
	if i := int(v.focus.Slot()); v.focus != entity.None && i < len(v.metas) {
		if m := &v.metas[i]; m.Alive && m.Gen == v.focus.Gen() {
			return m.X, m.Y, true
		}
	}
	return 0, 0, false
}

// compact frees the positions of the replicas collect dropped, after the frame of tick is built.
// When holes are more than half of the array, it moves the replicas down over them, so that the
// per-tick pass does not visit a mostly empty array; the records in flight of a replica that
// moved name its old position, so their acknowledgements are ignored (minPromote) and its
// baseline waits for a record sent from its new position.
func (v *View) compact(tick uint32) {
	if !v.removed {
		return
	}
	for i, b := range v.sc.bucket[:len(v.reps)] {
		if b == dropped {
			v.reps[i] = replica{hole: true, leaving: true}
			v.free = append(v.free, uint16(i))
		}
	}
	if len(v.free) < 32 || 2*len(v.free) <= len(v.reps) {
		return
	}
	j := 0
	for i := range v.reps {
		if v.reps[i].hole {
			continue
		}
		if i != j {
			v.reps[j], v.bases[j] = v.reps[i], v.bases[i]
			if v.stride > 0 {
				copy(v.baseFields[j*v.stride:(j+1)*v.stride], v.baseFields[i*v.stride:(i+1)*v.stride])
			}
			v.reps[j].minPromote = tick + 1
			v.index.set(v.reps[j].slot, j)
		}
		j++
	}
	v.reps, v.bases, v.baseFields, v.free = v.reps[:j], v.bases[:j], v.baseFields[:j*v.stride], v.free[:0]
}

// storeBaseline copies replica i's baseline out of the store's history, or drops it if it aged
// out of the history while the view was not built (full state is sent then).
//
//go:noinline
func (v *View) storeBaseline(rep *replica, i int) {
	if st, ok := v.stateAt(rep.slot, rep.baseTick); ok {
		v.bases[i], rep.baseStored = *st, true
		if v.stride > 0 {
			copy(v.baseFields[i*v.stride:(i+1)*v.stride], v.fieldsAt(rep.slot, rep.baseTick))
		}
	} else {
		rep.baseTick = 0
	}
}

// baseline is the state of replica ri's baseline: collect keeps it in bases once it is
// storeAgeFor old, so a younger one is still in the store's history.
func (v *View) baseline(ri uint16) *protocol.State {
	if v.reps[ri].baseStored {
		return &v.bases[ri]
	}
	st, _ := v.stateAt(v.reps[ri].slot, v.reps[ri].baseTick)
	return st
}

// baseFieldsOf is the field words of replica ri's baseline; nil without fields.
func (v *View) baseFieldsOf(ri uint16) []uint32 {
	if v.stride == 0 {
		return nil
	}
	if v.reps[ri].baseStored {
		return v.baseFields[int(ri)*v.stride : (int(ri)+1)*v.stride]
	}
	return v.fieldsAt(v.reps[ri].slot, v.reps[ri].baseTick)
}

// curFields is the slot's committed field words; nil without fields.
func (v *View) curFields(slot uint16) []uint32 {
	if v.stride == 0 {
		return nil
	}
	return v.fields[int(slot)*v.stride : (int(slot)+1)*v.stride]
}

// fieldsAt is the slot's field words at tick in the store's history, which holds them: the
// caller found the tick's state there.
func (v *View) fieldsAt(slot uint16, tick uint32) []uint32 {
	at := (int(tick&(v.history-1))*v.capacity + int(slot)) * v.stride
	return v.fieldHist[at : at+v.stride]
}

// stateAt is the slot's state at tick in the store's history, if the history still holds it;
// it reads the history the build fetched.
func (v *View) stateAt(slot uint16, tick uint32) (*protocol.State, bool) {
	if tick > v.now || v.now-tick >= v.history {
		return nil, false
	}
	return &v.hist[int(tick&(v.history-1))*v.capacity+int(slot)], true
}
