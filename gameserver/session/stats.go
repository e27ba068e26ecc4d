package session

import "github.com/netfleet/netfleet/gameserver/congestion"

// State is a session's health as the admin API reports it.
type State uint8

// States.
const (
	// StateHealthy: served at its declared rate with full throttle and detail.
	StateHealthy State = iota
	// StateDegraded: backed off by the congestion controller (a throttle under 1 or a bottleneck
	// ceiling on its byte rate), moved to a slower rate class or a lower detail level.
	StateDegraded
	// StateStalled: being skipped; it is closed with 1013 if this lasts.
	StateStalled
)

// String returns the state's name as the admin API spells it.
func (s State) String() string {
	switch s {
	case StateDegraded:
		return "degraded"
	case StateStalled:
		return "stalled"
	}
	return "healthy"
}

// Stats are a session's current figures, a plain value read without allocating.
type Stats struct {
	Slot  int
	State State
	// RateClass is 1, 2 or 4: the session is served at most every RateClass-th tick;
	// DeclaredClass is the class it declared, the floor RateClass relaxes back to.
	RateClass     int
	DeclaredClass int
	// DetailLevel is the detail level in force, 0 (full) to MaxLevel; InterestRadius the radius
	// it replicates within.
	DetailLevel    int
	InterestRadius float32
	// SkipRun is the number of due ticks skipped in a row.
	SkipRun int
	// Throttle is the congestion throttle in [floor, 1]; SendIntervalTick the rate lever.
	Throttle         float64
	SendIntervalTick uint32
	// SendRateHz is the number of ticks with a snapshot sent over the last second.
	SendRateHz float64
	// LossRatio is the application-level snapshot loss; EnetLossRatio the transport's.
	LossRatio     float64
	EnetLossRatio float64
	RTTMs         uint32
	BaselineRTTMs uint32
	// Congestion is what the congestion controller's last evaluation found: the signals that
	// back the peer off, none when it is healthy.
	Congestion congestion.Signals
	// FrameBudgetBytes is the budget of the last frame built.
	FrameBudgetBytes int
	// RateBytesPerSec is the pacer's rate (0 unlimited) and PacerBudgetBytes what it may send now.
	RateBytesPerSec  float64
	PacerBudgetBytes float64
	// CeilingBytesPerSec is the congestion controller's bottleneck ceiling on the byte rate, 0
	// when the peer's path has shown none; the pacer's rate is held under it.
	CeilingBytesPerSec float64
	KnownEntities      int
	// ClientTick is the newest tick the client reported having applied.
	ClientTick uint32
	// InboxBytes is what the inbox holds now, at most memory.maxPendingBytesPerConnection.
	InboxBytes int
}

// Counters are a session's cumulative counts since it started, a plain value read without
// allocating.
type Counters struct {
	FramesBuilt    uint64 // frames built with something in them or empty
	FramesIdle     uint64 // due ticks with nothing to send
	FramesSent     uint64 // frames with at least one packet sent
	PacketsSent    uint64
	PacketsDropped uint64 // snapshot packets the pacer dropped
	BytesSent      uint64 // payload bytes handed to the transport
	ResetsSent     uint64
	SendErrors     uint64

	SkipsBusy     uint64 // both frame slots busy
	SkipsPool     uint64 // the frame pool was exhausted
	SkipsLag      uint64 // the client had not applied what it was sent
	LagProbes     uint64 // frames sent to a lagging client to find out whether it is still there
	PushLogResets uint64 // skip runs longer than the push log, ended with a RESET
	LevelChanges  uint64

	MessagesReceived uint64
	BytesReceived    uint64
	Acks             uint64
	Pings            uint64
	Commands         uint64 // COMMANDs queued
	Malformed        uint64 // messages that did not decode or a client may not send
	Oversize         uint64 // messages over memory.maxInboundMessageBytes
	InboxRefused     uint64 // COMMANDs the inbox had no room for
	IngressRefused   uint64 // messages over the inbound budget
}

// MemoryUsage estimates the memory a session holds, in bytes.
type MemoryUsage struct {
	Session     int // the session value itself (controller, loss estimator, pacer)
	Replication int // its replication state (snapshot.View.MemoryBytes)
	Frames      int // frames held in its slots
	Inbox       int // its inbox of queued COMMANDs
	Total       int
}
