package session

import (
	"errors"
	"unsafe"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/congestion"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/pacing"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/snapshot"
)

// Errors of HandleMessage. They are plain values, so refusing a message allocates nothing.
var (
	ErrMalformed = errors.New("session: malformed message")
	ErrOversize  = errors.New("session: message larger than memory.maxInboundMessageBytes")
	ErrInboxFull = errors.New("session: inbox full (memory.maxPendingBytesPerConnection)")
	ErrRefused   = errors.New("session: over the inbound budget (ingress.bytesPerSecond)")
	ErrInactive  = errors.New("session: not active")
)

// Now is the time of one tick as a session sees it.
type Now struct {
	// Tick is the entity store's tick, the one frames are built for.
	Tick uint64
	// UnixMs is the wall clock in milliseconds: it stamps snapshots and times pings and loss.
	UnixMs int64
	// Nanos is a monotonic clock in nanoseconds: it paces bytes.
	Nanos int64
	// Overloaded reports that the tick loop runs late: every session is served a detail level
	// lower, and sessions of a declared rate class half as often.
	Overloaded bool
}

// Link is what the transport knows about the session's peer, read every tick.
type Link struct {
	// RTTMs is the transport's smoothed round-trip time; 0 while it is not measured yet.
	RTTMs uint32
	// LossRatio is the transport's own loss of reliable packets, 0..1.
	LossRatio float64
	// ReliableInFlight is the reliable data sent and not yet acknowledged, in bytes.
	ReliableInFlight uint32
}

// Sender puts a session's messages on its transport. Both methods copy data before returning.
type Sender interface {
	// SendSnapshot sends a SNAPSHOT packet unreliably.
	SendSnapshot(data []byte) error
	// SendReliable sends a message (RESET) reliably and in order.
	SendReliable(data []byte) error
}

// Outcome is what a session did on a tick.
type Outcome uint8

// Outcomes of Tick.
const (
	// NotDue: the session was not due a frame this tick (rate lever or rate class). Its state
	// waits for the next frame, which carries the union.
	NotDue Outcome = iota
	// Idle: the session was due, and nothing had changed for it; nothing was sent. Not a skip.
	Idle
	// Built: a frame was built; its bytes went out or wait in a frame slot.
	Built
	// Skipped: the session was due and could not be served (see Result.Skip); nothing was
	// gathered for it.
	Skipped
	// Close: the session must be closed with Result.CloseCode.
	Close
)

// Result is the outcome of one Tick.
type Result struct {
	Outcome   Outcome
	CloseCode uint32
}

// frameSlot is one of a session's two frame slots.
type frameSlot struct {
	f     *snapshot.Frame
	next  int  // first packet not yet decided
	reset bool // the frame's RESET message still waits for the pacer
}

// Session is one connected peer's state, owned by the tick loop: replication (snapshot.View),
// congestion controller, application-level loss estimator, pacer, frame slots, inbox and counters.
// It is not safe for concurrent use.
type Session struct {
	cfg    Config
	frames *FramePool
	slot   int
	active bool

	snap   *snapshot.View
	focus  entity.ID
	groups uint64
	cc     congestion.Controller
	loss   congestion.LossEstimator
	pacer  pacing.Pacer
	rng    pacing.Rand

	// bytesPerSecond is the session's byte rate before the throttle: the config's, or the one
	// set for this session.
	bytesPerSecond int
	ownRate        bool

	inflight, ready frameSlot
	lastSentTick    uint64
	lastSendMs      int64 // when a frame last went out
	meter           sendMeter
	frameBudget     int
	// ceilingBound: the frame built last left records out for the bottleneck's frame ceiling.
	ceilingBound bool
	link         Link
	lossRatio    float64
	tick         uint64
	nowMs        int64

	rc         rateClass
	sent       sentLog
	runReset   bool  // the current skip run already ended in a RESET
	lastPingMs int64 // when the last PING arrived (the session's start before the first)
	ingress    ingress
	abusive    bool
	bl         budgetLevel
	pressure   int // detail level floor set by the state-pool policy
	level      int // detail level in force

	inbox []byte // queued COMMANDs, each its payload's length, sequence and tick, then the payload

	ack  protocol.Ack
	ping protocol.Ping

	ctr Counters
}

// New returns an inactive session that takes its frames from frames.
func New(cfg Config, frames *FramePool) *Session {
	return &Session{cfg: cfg, frames: frames, slot: -1}
}

// Start makes the session serve a new peer in slot, replicating through snap around focus (the
// peer's avatar). snap must be fresh (StatePool.Get) and is owned by the session until End.
//
// declaredClass is the rate class the peer declared (DeclaredRateClass of its connect data).
func (s *Session) Start(slot int, snap *snapshot.View, focus entity.ID, declaredClass int, now Now) error {
	if err := snap.SetConfig(s.cfg.Snapshot); err != nil {
		return err
	}
	s.slot, s.active = slot, true
	s.snap, s.focus, s.groups = snap, focus, 0
	snap.SetFocus(focus)
	snap.SetAudience(slot, 0)
	s.cc.Reset(s.cfg.Congestion)
	s.loss.Reset()
	s.pacer = pacing.Pacer{}
	s.rng = pacing.NewRand(uint32(slot)*0x9e3779b1 ^ uint32(now.Nanos))
	s.ownRate = false
	s.bytesPerSecond = s.cfg.BytesPerSecond
	s.pacer.SetRate(pacing.RateFor(s.bytesPerSecond, 1))
	s.pacer.Refill(now.Nanos)
	s.inflight, s.ready = frameSlot{}, frameSlot{}
	s.lastSentTick = congestion.NeverSent
	s.meter.reset(s.cfg.TickRateHz)
	s.frameBudget = 0
	s.ceilingBound = false
	s.link, s.lossRatio = Link{}, 0
	s.tick, s.nowMs = now.Tick, now.UnixMs
	s.lastSendMs = now.UnixMs
	s.rc.reset(declaredClass, uint64(slot), now.UnixMs)
	s.sent.reset()
	s.runReset = false
	s.lastPingMs = now.UnixMs
	s.ingress.reset(&s.cfg, now.UnixMs)
	s.abusive = false
	s.bl.reset(now.Tick, levelWindowTicks(s.cfg.TickRateHz))
	s.pressure, s.level = 0, 0
	if cap(s.inbox) != s.cfg.MaxPendingBytes {
		s.inbox = make([]byte, 0, s.cfg.MaxPendingBytes)
	}
	s.inbox = s.inbox[:0]
	s.ctr = Counters{}
	return nil
}

// End stops serving the peer: the frames in its slots go back to the pool and the replication
// state is handed back for reuse. The session can Start again.
func (s *Session) End() *snapshot.View {
	for _, sl := range [2]*frameSlot{&s.inflight, &s.ready} {
		if sl.f != nil {
			s.frames.Put(sl.f)
			*sl = frameSlot{}
		}
	}
	snap := s.snap
	s.snap, s.active, s.focus = nil, false, 0
	s.inbox = s.inbox[:0]
	return snap
}

// Active reports whether the session serves a peer.
func (s *Session) Active() bool { return s.active }

// Slot is the peer's slot, -1 before the first Start.
func (s *Session) Slot() int { return s.slot }

// Focus is the entity the session replicates around, its peer's avatar.
func (s *Session) Focus() entity.ID { return s.focus }

// SetGroups sets the groups of the session's player, whose entities it sees (entity.Visibility),
// from the next frame on.
func (s *Session) SetGroups(groups uint64) {
	s.groups = groups
	if s.snap != nil {
		s.snap.SetAudience(s.slot, groups)
	}
}

// Follow moves the session's interest to another entity, from the next frame on.
func (s *Session) Follow(id entity.ID) {
	s.focus = id
	if s.snap != nil {
		s.snap.SetFocus(id)
	}
}

// InterestRadius is the radius the session replicates within now, in meters.
func (s *Session) InterestRadius() float32 {
	return levelConfig(s.cfg.Snapshot, s.level).InterestRadius
}

// Replication is the session's replication state; nil while inactive.
func (s *Session) Replication() *snapshot.View { return s.snap }

// SetConfig installs a new config between ticks (live reconfig). The congestion controller keeps
// its throttle and baseline (clamped to the new floor); the pacer keeps its budget.
func (s *Session) SetConfig(cfg Config) error {
	if s.active {
		if err := s.snap.SetConfig(levelConfig(cfg.Snapshot, s.level)); err != nil {
			return err
		}
	}
	tickChanged := cfg.TickRateHz != s.cfg.TickRateHz
	s.cfg = cfg
	s.cc.SetParams(cfg.Congestion)
	s.ingress.configure(&s.cfg)
	if !s.ownRate {
		s.bytesPerSecond = cfg.BytesPerSecond
	}
	if tickChanged {
		s.meter.reset(cfg.TickRateHz)
	}
	if s.active && cap(s.inbox) != cfg.MaxPendingBytes {
		kept := s.inbox
		s.inbox = make([]byte, 0, cfg.MaxPendingBytes)
		s.keepWhole(kept)
	}
	return nil
}

// keepWhole copies the whole queued commands of old that fit the inbox.
func (s *Session) keepWhole(old []byte) {
	for len(old) > 0 {
		n := inboxHeader + int(old[0])
		if len(s.inbox)+n > cap(s.inbox) {
			s.ctr.InboxRefused++
		} else {
			s.inbox = append(s.inbox, old[:n]...)
		}
		old = old[n:]
	}
}

// SetStatePressure sets the detail level the state-pool policy holds the session at, at least:
// 0 (none) up to MaxLevel. It takes effect at the next tick.
func (s *Session) SetStatePressure(level int) { s.pressure = min(max(level, 0), MaxLevel) }

// StatePressure is the level floor set by SetStatePressure.
func (s *Session) StatePressure() int { return s.pressure }

// SetRateClass declares the session's rate class (1, 2 or 4; anything else is 1), as a profile
// would. A slower class the session was moved to by skips stays until it is relaxed.
func (s *Session) SetRateClass(class int) {
	s.rc.declared = ClassOf(class)
	if s.rc.episode {
		s.rc.class = max(s.rc.class, s.rc.declared)
	} else {
		s.rc.class = s.rc.declared
	}
}

// SetBytesPerSecond sets this session's byte rate, overriding budget.sessionBytesPerSecond until
// the session ends; 0 is unlimited. A negative rate restores the config's.
func (s *Session) SetBytesPerSecond(bytesPerSecond int) {
	if bytesPerSecond < 0 {
		s.ownRate, s.bytesPerSecond = false, s.cfg.BytesPerSecond
		return
	}
	s.ownRate, s.bytesPerSecond = true, bytesPerSecond
}

// HandleMessage processes one message from the peer, received at nowMs: an ACK is applied to the
// replication state and the loss estimator at once, a PING records the client's last applied
// tick, a COMMAND is queued in the inbox for the next tick. A message that does not decode, or
// that a client may not send, is counted and dropped (ErrMalformed); so is one over the size limit
// (ErrOversize) and a COMMAND the inbox has no room for (ErrInboxFull). It never panics and, for
// a warm session, allocates nothing.
func (s *Session) HandleMessage(b []byte, nowMs int64) error {
	if !s.active {
		return ErrInactive
	}
	s.ctr.MessagesReceived++
	s.ctr.BytesReceived += uint64(len(b))
	t, err := protocol.PeekType(b)
	control := err == nil && (t == protocol.MsgAck || t == protocol.MsgPing)
	if !s.ingress.admit(len(b), control, nowMs) {
		s.ctr.IngressRefused++
		if s.ingress.roll(nowMs) {
			s.abusive = true
		}
		return ErrRefused
	}
	if len(b) > s.cfg.MaxInboundMessageBytes {
		s.ctr.Oversize++
		return ErrOversize
	}
	if err != nil {
		return s.malformed()
	}
	switch t {
	case protocol.MsgAck:
		if protocol.DecodeAck(b, &s.ack) != nil {
			return s.malformed()
		}
		if _, err := s.snap.HandleAck(&s.ack); err != nil {
			return s.malformed()
		}
		s.loss.OnAckFieldAt(s.ack.Latest, s.ack.Received, nowMs)
		s.ctr.Acks++
	case protocol.MsgPing:
		if protocol.DecodePing(b, &s.ping) != nil {
			return s.malformed()
		}
		s.snap.ReportClientTick(s.ping.LastAppliedTick)
		s.lastPingMs = nowMs
		s.ctr.Pings++
	case protocol.MsgCommand:
		// A local Command: its payload aliases b, which must not be kept past the call.
		var cmd protocol.Command
		if protocol.DecodeCommand(b, &cmd) != nil {
			return s.malformed()
		}
		n := inboxHeader + len(cmd.Payload)
		if len(s.inbox)+n > cap(s.inbox) {
			s.ctr.InboxRefused++
			return ErrInboxFull
		}
		s.inbox = append(s.inbox, byte(len(cmd.Payload)), byte(cmd.Seq), byte(cmd.Seq>>8),
			byte(cmd.Tick), byte(cmd.Tick>>8), byte(cmd.Tick>>16), byte(cmd.Tick>>24))
		s.inbox = append(s.inbox, cmd.Payload...)
		s.ctr.Commands++
	default:
		return s.malformed()
	}
	return nil
}

func (s *Session) malformed() error {
	s.ctr.Malformed++
	return ErrMalformed
}

// inboxHeader is the bytes an inbox entry takes before its payload: the payload's length, the
// command's sequence and its tick.
const inboxHeader = 7

// Command is a queued COMMAND: the client's sequence, the newest server tick the client had
// applied when it sent it, and its payload.
type Command struct {
	Seq     uint16
	Tick    uint32
	Payload []byte
}

// DrainCommands calls fn with every queued COMMAND, oldest first, and empties the inbox. The
// payload is only valid during the call. The session's next frames acknowledge the newest of them
// to the client (protocol.FlagInputAck): the game has applied it.
func (s *Session) DrainCommands(fn func(Command)) {
	b := s.inbox
	for len(b) > 0 {
		n := int(b[0])
		c := Command{
			Seq:     uint16(b[1]) | uint16(b[2])<<8,
			Tick:    uint32(b[3]) | uint32(b[4])<<8 | uint32(b[5])<<16 | uint32(b[6])<<24,
			Payload: b[inboxHeader : inboxHeader+n],
		}
		fn(c)
		if s.snap != nil {
			s.snap.AckInput(c.Seq)
		}
		b = b[inboxHeader+n:]
	}
	s.inbox = s.inbox[:0]
}

// Tick runs the session for one tick, after the game has stepped: it steps the congestion
// controller from the link, refills the pacer, moves waiting frame bytes to out as the pacer
// admits them, applies the closing rules, and, when the session is due and can be served, builds
// its frame and sends what the pacer admits.
func (s *Session) Tick(now Now, link Link, out Sender) Result {
	if !s.active {
		return Result{}
	}
	s.tick, s.nowMs, s.link = now.Tick, now.UnixMs, link
	s.lossRatio = s.loss.Update(now.UnixMs, link.RTTMs)
	ackRTT, haveAckRTT := s.loss.TakeAckRTT()
	s.cc.Step(congestion.Sample{LossRatio: s.lossRatio, RTTMs: link.RTTMs, ReliableBytesInFlight: link.ReliableInFlight,
		AckRTTMs: ackRTT, HaveAckRTT: haveAckRTT, Delivered: s.loss.Delivered(), NowMs: uint32(now.UnixMs),
		CeilingBound: s.ceilingBound})
	s.ceilingBound = false
	s.pacer.SetRate(s.byteRate())
	s.pacer.Refill(now.Nanos)
	if s.abusive || s.ingress.roll(now.UnixMs) {
		return Result{Outcome: Close, CloseCode: protocol.CloseAbuse}
	}
	if now.UnixMs-s.lastPingMs > s.cfg.PingTimeoutMs {
		return Result{Outcome: Close, CloseCode: protocol.CloseNoPing}
	}
	s.pump(out)
	s.updateLevel(now)

	if !s.rc.due(now.Tick, now.Overloaded) || !s.cc.ShouldSend(now.Tick, s.lastSentTick) {
		return Result{Outcome: NotDue}
	}
	probe := false
	if s.lagging(now.UnixMs) {
		// Lagging: nothing new until the client applies what it was sent. A frame that was lost
		// on the way could never be applied, so after another allowance without a send one
		// frame goes out as a probe; it does not end the stall.
		if now.UnixMs-s.lastSendMs < s.lagAllowanceMs() {
			return s.skip(now, &s.ctr.SkipsLag)
		}
		probe = true
	}
	if s.inflightBusy() && s.ready.f != nil {
		return s.skip(now, &s.ctr.SkipsBusy)
	}
	f := s.frames.Get()
	if f == nil {
		return s.skip(now, &s.ctr.SkipsPool)
	}
	if s.rc.skips > 0 && now.Tick-s.rc.runStart > uint64(s.cfg.PushLogTicks) && !s.runReset {
		// Past the push log: the client's view is re-delivered whole.
		s.snap.Reset()
		s.runReset = true
		s.ctr.PushLogResets++
	}
	if probe {
		s.ctr.LagProbes++
	} else {
		s.rc.serve(now.Tick, now.UnixMs)
		s.runReset = false
	}
	var byCeiling bool
	s.frameBudget, byCeiling = s.budget()
	res, err := s.snap.BuildFrame(s.frameBudget, now.UnixMs, f)
	if err != nil {
		// Only a second build for one store tick fails; the frame of that tick went already.
		s.frames.Put(f)
		return Result{Outcome: NotDue}
	}
	// Spawns the enter budget deferred were left out by the level's own rule, not by the budget.
	starved := res.Starved()
	// A frame cut by the bottleneck ceiling does not raise the detail level: the ceiling is the
	// congestion response, and the controller's probes need the peer's demand to show whether
	// the path carries more.
	s.bl.frame(starved && !byCeiling)
	s.ceilingBound = starved && byCeiling
	s.ctr.FramesBuilt++
	if f.Packets() == 0 && f.ResetMessage() == nil {
		s.frames.Put(f)
		s.ctr.FramesIdle++
		return Result{Outcome: Idle}
	}
	s.lastSentTick = now.Tick
	s.ready = frameSlot{f: f, reset: f.ResetMessage() != nil}
	s.pump(out)
	return Result{Outcome: Built}
}

// skip records a due tick the session could not be served on; nothing was gathered for it.
func (s *Session) skip(now Now, counter *uint64) Result {
	*counter++
	if s.rc.skip(now.Tick, now.UnixMs, s.cfg.CloseStalledAfterMs) {
		return Result{Outcome: Close, CloseCode: protocol.CloseStalled}
	}
	return Result{Outcome: Skipped}
}

// lagAllowanceMs is how long a frame may take to be applied: the RTT (the transport's, or the
// acknowledgements' before it has one) plus backpressure.lagSkipRttAllowanceMs.
func (s *Session) lagAllowanceMs() int64 {
	rtt := int64(s.link.RTTMs)
	if rtt == 0 {
		rtt = int64(s.snap.RTTTicks() * 1000 / float32(s.cfg.TickRateHz))
	}
	return rtt + s.cfg.LagAllowanceMs
}

// lagging reports whether a frame sent long enough ago to have been applied is newer than the
// client's last applied tick.
func (s *Session) lagging(nowMs int64) bool {
	ref, ok := s.sent.dueBy(nowMs - s.lagAllowanceMs())
	return ok && uint64(s.snap.ClientTick()) < ref
}

// updateLevel rolls the budget level's window and installs the detail level now in force: the
// budget's, one more under overload, at least the state-pool policy's floor.
func (s *Session) updateLevel(now Now) {
	s.bl.roll(now.Tick, levelWindowTicks(s.cfg.TickRateHz))
	level := s.bl.level
	if now.Overloaded {
		level++
	}
	level = min(max(level, s.pressure), MaxLevel)
	if level == s.level {
		return
	}
	// The config was validated when it was installed; a level only scales two of its fields.
	if s.snap.SetConfig(levelConfig(s.cfg.Snapshot, level)) == nil {
		s.level = level
		s.ctr.LevelChanges++
	}
}

// budget is the byte budget of the session's next frame: the budget lever applied to the static
// per-frame budget, capped by the frame capacity and by what the session's byte rate affords per
// send, so a frame is normally admitted by the pacer whole and nothing is dropped.
//
// Under a bottleneck ceiling the frame is also held to the controller's frame ceiling, which
// keeps each frame quick to cross the bottleneck however rarely the throttle sends; byCeiling
// reports that the frame ceiling is what set the budget.
func (s *Session) budget() (b int, byCeiling bool) {
	b = s.cfg.FrameBytes
	if st := s.cfg.SnapshotBytesPerTick; st > 0 {
		b = min(b, s.cc.EffectiveBudget(st))
	}
	if r := s.pacer.Rate(); r > 0 {
		every := max(uint64(s.cc.SendIntervalTicks()), uint64(s.rc.class))
		perSend := int(r * float64(every) / float64(s.cfg.TickRateHz))
		b = min(b, max(perSend, netcode.MinSnapshotBytesPerTick))
	}
	if fc := s.cc.FrameCeilingBytes(); fc > 0 && fc <= b {
		return fc, true
	}
	return b, false
}

// byteRate is the session's pacing rate: its byte rate scaled by the throttle, held under the
// controller's bottleneck ceiling. 0 is unlimited.
func (s *Session) byteRate() float64 {
	r := pacing.RateFor(s.bytesPerSecond, s.cc.Throttle())
	if c := s.cc.ByteRateCeiling(); c > 0 && (r == 0 || c < r) {
		r = c
	}
	return r
}

// inDebt reports whether the pacer has charged bytes its rate has not yet paid for: the last
// frame's bytes are, at the session's rate, still on their way out.
func (s *Session) inDebt() bool { return s.pacer.Rate() > 0 && s.pacer.Budget() < 0 }

// inflightBusy reports whether the in-flight slot is taken: a frame waits for the pacer, or the
// bytes of the last one are not paid for yet.
func (s *Session) inflightBusy() bool { return s.inflight.f != nil || s.inDebt() }

// pump hands frame bytes to out as the pacer admits them: the in-flight frame first, then the
// ready one moves up. A RESET waits for the pacer (reliable traffic is never dropped); snapshot
// packets are sent or dropped by the pacer's drop probability, which a frame built within
// budget() rarely meets. A dropped packet is safe: its records are not acknowledged, so they are
// sent again.
func (s *Session) pump(out Sender) {
	for {
		if s.inflight.f == nil {
			if s.ready.f == nil {
				return
			}
			s.inflight, s.ready = s.ready, frameSlot{}
		}
		if s.inDebt() || !s.drain(&s.inflight, out) {
			return
		}
		s.frames.Put(s.inflight.f)
		s.inflight = frameSlot{}
	}
}

// drain offers a slot's undecided messages to the pacer and reports whether all are decided.
func (s *Session) drain(sl *frameSlot, out Sender) bool {
	f := sl.f
	if sl.reset {
		msg := f.ResetMessage()
		if !s.pacer.AdmitReliable(len(msg)) {
			return false
		}
		if err := out.SendReliable(msg); err != nil {
			s.ctr.SendErrors++
		} else {
			s.ctr.ResetsSent++
			s.ctr.BytesSent += uint64(len(msg))
		}
		sl.reset = false
	}
	backlog := 0
	for i := sl.next; i < f.Packets(); i++ {
		backlog += len(f.Packet(i))
	}
	sent := 0
	for ; sl.next < f.Packets(); sl.next++ {
		p := f.Packet(sl.next)
		switch {
		case !s.pacer.AdmitUnreliable(len(p), backlog, s.rng.Uint32()):
			s.ctr.PacketsDropped++
		case out.SendSnapshot(p) != nil:
			s.ctr.SendErrors++
		default:
			s.loss.OnSent(f.Seq(sl.next), len(p), s.nowMs)
			s.ctr.PacketsSent++
			s.ctr.BytesSent += uint64(len(p))
			sent++
		}
		backlog -= len(p)
	}
	if sent > 0 {
		s.ctr.FramesSent++
		s.meter.mark(s.tick)
		s.sent.record(uint64(f.Tick()), s.nowMs)
		s.lastSendMs = s.nowMs
	}
	return true
}

// Stats returns the session's current figures. It is cheap and allocates nothing, so the tick
// loop can read it for every peer every tick.
func (s *Session) Stats() Stats {
	st := Stats{
		Slot:             s.slot,
		Throttle:         s.cc.Throttle(),
		SendIntervalTick: s.cc.SendIntervalTicks(),
		LossRatio:        s.lossRatio,
		EnetLossRatio:    s.link.LossRatio,
		RTTMs:            s.link.RTTMs,
		BaselineRTTMs:    s.cc.BaselineRTTMs(),
		Congestion:       s.cc.Signals(),
		FrameBudgetBytes: s.frameBudget,
		RateBytesPerSec:  s.pacer.Rate(),
		PacerBudgetBytes: s.pacer.Budget(),
		// The controller holds none while disabled.
		CeilingBytesPerSec: s.cc.ByteRateCeiling(),
		RateClass:          s.rc.class,
		DeclaredClass:      s.rc.declared,
		DetailLevel:        s.level,
		SkipRun:            s.rc.skips,
		State:              StateHealthy,
	}
	if !s.active {
		return st
	}
	st.SendRateHz = float64(s.meter.count(s.tick)) * float64(s.cfg.TickRateHz) / float64(s.meter.window)
	st.KnownEntities = s.snap.Known()
	st.ClientTick = s.snap.ClientTick()
	st.InterestRadius = s.InterestRadius()
	st.InboxBytes = len(s.inbox)
	switch {
	case s.rc.skips > 0:
		st.State = StateStalled
	case s.cc.Throttle() < 1 || st.CeilingBytesPerSec > 0 || s.rc.class > s.rc.declared || s.level > 0 || s.rc.episode:
		st.State = StateDegraded
	}
	return st
}

// Counters returns the session's cumulative counters since Start.
func (s *Session) Counters() Counters { return s.ctr }

// MemoryUsage estimates the memory the session holds.
func (s *Session) MemoryUsage() MemoryUsage {
	m := MemoryUsage{Session: int(unsafe.Sizeof(*s)), Inbox: cap(s.inbox)}
	if s.snap != nil {
		m.Replication = s.snap.MemoryBytes()
	}
	for _, sl := range [2]*frameSlot{&s.inflight, &s.ready} {
		if sl.f != nil {
			m.Frames += sl.f.Cap()
		}
	}
	m.Total = m.Session + m.Replication + m.Frames + m.Inbox
	return m
}
