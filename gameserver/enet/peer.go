package enet

/*
#include "nfenet.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
	"unsafe"
)

// Send errors, wrapped by Peer.Send.
var (
	ErrNoPeer         = errors.New("no peer")
	ErrNotConnected   = errors.New("peer not connected")
	ErrBadChannel     = errors.New("channel out of range")
	ErrPacketTooLarge = errors.New("packet larger than the host's maximum packet size")
	ErrBadFlags       = errors.New("unknown packet flags")
)

// PeerState is the connection state of a peer slot.
type PeerState int

// Peer states, as ENet names them.
const (
	StateDisconnected            PeerState = C.ENET_PEER_STATE_DISCONNECTED
	StateConnecting              PeerState = C.ENET_PEER_STATE_CONNECTING
	StateAcknowledgingConnect    PeerState = C.ENET_PEER_STATE_ACKNOWLEDGING_CONNECT
	StateConnectionPending       PeerState = C.ENET_PEER_STATE_CONNECTION_PENDING
	StateConnectionSucceeded     PeerState = C.ENET_PEER_STATE_CONNECTION_SUCCEEDED
	StateConnected               PeerState = C.ENET_PEER_STATE_CONNECTED
	StateDisconnectLater         PeerState = C.ENET_PEER_STATE_DISCONNECT_LATER
	StateDisconnecting           PeerState = C.ENET_PEER_STATE_DISCONNECTING
	StateAcknowledgingDisconnect PeerState = C.ENET_PEER_STATE_ACKNOWLEDGING_DISCONNECT
	StateZombie                  PeerState = C.ENET_PEER_STATE_ZOMBIE
)

var stateNames = [...]string{
	StateDisconnected:            "disconnected",
	StateConnecting:              "connecting",
	StateAcknowledgingConnect:    "acknowledging-connect",
	StateConnectionPending:       "connection-pending",
	StateConnectionSucceeded:     "connection-succeeded",
	StateConnected:               "connected",
	StateDisconnectLater:         "disconnect-later",
	StateDisconnecting:           "disconnecting",
	StateAcknowledgingDisconnect: "acknowledging-disconnect",
	StateZombie:                  "zombie",
}

// String returns the state's name, e.g. "connected".
func (s PeerState) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Peer is a handle to one peer slot of a Host: a small value, cheap to copy
// and compare. It is valid until its Host is destroyed. A slot is reused by a
// later connection once the peer disconnects, so a Peer kept past its
// EventDisconnect refers to whoever takes the slot next. The zero Peer (from
// an empty event or a failed lookup) is inert: queries return zero values,
// actions do nothing and Send fails with ErrNoPeer.
type Peer struct {
	p *C.ENetPeer
}

// IsZero reports whether p is the zero Peer.
func (p Peer) IsZero() bool { return p.p == nil }

// Slot is the peer's index in its host's peer array, 0..Config.Peers-1: a
// bounded, reused identity fit for metric labels and session tables. The zero
// Peer reports -1.
func (p Peer) Slot() int {
	if p.p == nil {
		return -1
	}
	// ENet sets incomingPeerID to the slot index when it creates the host.
	return int(p.p.incomingPeerID)
}

// Address is the remote address of the peer.
func (p Peer) Address() netip.AddrPort {
	if p.p == nil {
		return netip.AddrPort{}
	}
	return fromENet(p.p.address)
}

// State is the peer's connection state.
func (p Peer) State() PeerState {
	if p.p == nil {
		return StateDisconnected
	}
	return PeerState(p.p.state)
}

// Send queues data on channel with the given delivery flags. ENet copies the
// bytes, so data may be reused as soon as Send returns; ENet frees its copy once
// sent (and acknowledged, if reliable). Data goes out on the next Service or
// Flush. Once warm, a successful Send allocates nothing in Go.
func (p Peer) Send(channel uint8, data []byte, flags PacketFlags) error {
	if p.p == nil {
		return fmt.Errorf("enet: send on channel %d: %w", channel, ErrNoPeer)
	}
	if flags&^knownFlags != 0 {
		return fmt.Errorf("enet: send to peer %d on channel %d: %w (%#x)", p.Slot(), channel, ErrBadFlags, uint32(flags))
	}
	var ptr unsafe.Pointer
	if len(data) > 0 {
		ptr = unsafe.Pointer(&data[0])
	}
	// data is a Go pointer that C only reads during the call (ENet copies it).
	r := C.nfe_peer_send(p.p, C.enet_uint8(channel), ptr, C.size_t(len(data)), C.enet_uint32(flags))
	if r == C.NFE_SEND_OK {
		return nil
	}
	var cause error
	switch r {
	case C.NFE_SEND_NOT_CONNECTED:
		cause = fmt.Errorf("%w (state %s)", ErrNotConnected, p.State())
	case C.NFE_SEND_BAD_CHANNEL:
		cause = fmt.Errorf("%w (peer has %d)", ErrBadChannel, p.p.channelCount)
	case C.NFE_SEND_TOO_LARGE:
		cause = fmt.Errorf("%w (%d > %d bytes)", ErrPacketTooLarge, len(data), p.p.host.maximumPacketSize)
	case C.NFE_SEND_NO_MEMORY:
		cause = errors.New("out of C memory")
	default:
		cause = errors.New("enet_peer_send refused the packet")
	}
	return fmt.Errorf("enet: send %d bytes to peer %d on channel %d: %w", len(data), p.Slot(), channel, cause)
}

// Disconnect asks the remote side to disconnect, after the data already queued;
// EventDisconnect follows on both sides, the remote one carrying data.
func (p Peer) Disconnect(data uint32) {
	if p.p != nil {
		C.enet_peer_disconnect(p.p, C.enet_uint32(data))
	}
}

// DisconnectNow sends a disconnect at once, without waiting for an answer, and
// frees the slot immediately; no local EventDisconnect is generated.
func (p Peer) DisconnectNow(data uint32) {
	if p.p != nil {
		C.enet_peer_disconnect_now(p.p, C.enet_uint32(data))
	}
}

// DisconnectLater disconnects once every queued outgoing packet has been sent.
func (p Peer) DisconnectLater(data uint32) {
	if p.p != nil {
		C.enet_peer_disconnect_later(p.p, C.enet_uint32(data))
	}
}

// Reset drops the peer without telling the remote side and frees the slot; no
// event is generated.
func (p Peer) Reset() {
	if p.p != nil {
		C.enet_peer_reset(p.p)
	}
}

// SetPingInterval sets how often ENet pings an otherwise idle peer, which is
// what keeps RTT and loss fresh; 0 restores ENet's 500 ms.
func (p Peer) SetPingInterval(interval time.Duration) {
	if p.p != nil {
		C.enet_peer_ping_interval(p.p, millis(interval))
	}
}

// SetTimeout sets when ENet gives up on a peer: once a reliable packet has
// gone unacknowledged for maximum, or for minimum if its retransmit backoff
// (doubling per attempt) has reached limit. Zero values keep ENet's defaults
// (32, 5 s, 30 s).
func (p Peer) SetTimeout(limit uint32, minimum, maximum time.Duration) {
	if p.p != nil {
		C.enet_peer_timeout(p.p, C.enet_uint32(limit), millis(minimum), millis(maximum))
	}
}

// ConfigureThrottle sets ENet's unreliable-packet throttle on both ends of the
// connection: the throttle (0..32) rises by acceleration when an RTT sample
// beats the baseline and falls by deceleration when it is well above it;
// interval is how often ENet renews that baseline.
func (p Peer) ConfigureThrottle(interval time.Duration, acceleration, deceleration uint32) {
	if p.p != nil {
		C.enet_peer_throttle_configure(p.p, millis(interval), C.enet_uint32(acceleration), C.enet_uint32(deceleration))
	}
}

// LinkStats is what ENet knows about a peer's link, read straight from
// ENetPeer.
type LinkStats struct {
	// RTT is ENet's smoothed round-trip time of reliable packets, RTTVariance
	// its mean deviation and LowestRTT the lowest smoothed RTT in ENet's
	// current 10 s statistics interval; all at millisecond resolution. Before
	// the first acknowledgement RTT is ENet's 500 ms default.
	RTT         time.Duration
	RTTVariance time.Duration
	LowestRTT   time.Duration
	// PacketLoss is ENet's smoothed loss of reliable packets, 0..1, updated
	// every 10 s.
	PacketLoss float64
	// PacketThrottle is ENet's unreliable throttle, 0..32 (32 = nothing
	// dropped); ThrottleRatio is the same as 0..1.
	PacketThrottle uint32
	ThrottleRatio  float64
	// ReliableDataInTransit is bytes of reliable data sent but not yet
	// acknowledged.
	ReliableDataInTransit uint32
	// TotalWaitingData is bytes received but not yet delivered to the
	// application (bounded by Config.MaximumWaitingData).
	TotalWaitingData uint64
	// IncomingDataTotal and OutgoingDataTotal are bytes counted in ENet's
	// current bandwidth-throttle window (about a second).
	IncomingDataTotal uint32
	OutgoingDataTotal uint32
}

// LinkStats reads the peer's link statistics. It allocates nothing and makes
// no C call, so it is cheap enough for every peer every tick.
func (p Peer) LinkStats() LinkStats {
	if p.p == nil {
		return LinkStats{}
	}
	c := p.p
	loss := float64(c.packetLoss) / C.ENET_PEER_PACKET_LOSS_SCALE
	// ENet's ratio can overshoot when retransmissions outnumber sends.
	loss = min(loss, 1)
	throttle := uint32(c.packetThrottle)
	return LinkStats{
		RTT:                   time.Duration(c.roundTripTime) * time.Millisecond,
		RTTVariance:           time.Duration(c.roundTripTimeVariance) * time.Millisecond,
		LowestRTT:             time.Duration(c.lowestRoundTripTime) * time.Millisecond,
		PacketLoss:            loss,
		PacketThrottle:        throttle,
		ThrottleRatio:         float64(throttle) / C.ENET_PEER_PACKET_THROTTLE_SCALE,
		ReliableDataInTransit: uint32(c.reliableDataInTransit),
		TotalWaitingData:      uint64(c.totalWaitingData),
		IncomingDataTotal:     uint32(c.incomingDataTotal),
		OutgoingDataTotal:     uint32(c.outgoingDataTotal),
	}
}
