package enet

/*
#include "nfenet.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"time"
	"unsafe"
)

// MaxPeers is the largest peer count ENet supports on one host.
const MaxPeers = C.ENET_PROTOCOL_MAXIMUM_PEER_ID

// MaxChannels is the largest channel count ENet supports per peer.
const MaxChannels = C.ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT

// Config describes a host to create.
type Config struct {
	// Address is the local IPv4 address and port to bind; port 0 picks a free
	// port (see Host.Address). The zero value makes an unbound client host.
	Address netip.AddrPort
	// Peers is the number of peer slots, 1..MaxPeers.
	Peers int
	// Channels caps the channels a peer may open, 0..MaxChannels; 0 = MaxChannels.
	Channels int
	// IncomingBandwidth and OutgoingBandwidth limit the host in bytes per
	// second; 0 = unlimited.
	IncomingBandwidth uint32
	OutgoingBandwidth uint32
	// MaximumPacketSize caps one packet sent or received, in bytes;
	// 0 keeps ENet's 32 MiB.
	MaximumPacketSize int
	// MaximumWaitingData caps the bytes a peer may hold waiting for delivery
	// to the application; 0 keeps ENet's 32 MiB.
	MaximumWaitingData int
	// ConnectRate limits CONNECT attempts per source address; zero = off.
	ConnectRate ConnectRate
}

// ConnectRate is a token bucket per source IP address for CONNECT datagrams:
// Burst attempts at once, refilled at PerSecond. Attempts over the rate are
// dropped before ENet allocates a peer for them. The zero value turns it off.
type ConnectRate struct {
	PerSecond float64
	Burst     int
}

func (r ConnectRate) validate() error {
	switch {
	case math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) || r.PerSecond < 0:
		return fmt.Errorf("connect rate %v per second must be finite and >= 0", r.PerSecond)
	case r.Burst < 0:
		return fmt.Errorf("connect burst %d must be >= 0", r.Burst)
	case r.PerSecond > 0 && r.Burst < 1:
		return fmt.Errorf("connect burst %d must be >= 1 when a rate is set", r.Burst)
	case r.PerSecond == 0 && r.Burst != 0:
		return fmt.Errorf("connect burst %d needs a rate per second", r.Burst)
	}
	return nil
}

// Totals are a host's cumulative traffic counters. ENet counts bytes with its
// own protocol headers but without UDP/IP headers.
type Totals struct {
	SentBytes       uint64
	SentPackets     uint64
	ReceivedBytes   uint64
	ReceivedPackets uint64
}

// Host is an ENet host: one UDP socket and a fixed array of peer slots.
type Host struct {
	c      *C.nfe_host // nil after Destroy
	addr   netip.AddrPort
	totals Totals
}

// NewHost creates a host. Destroy releases it.
func NewHost(cfg Config) (*Host, error) {
	where := "client host"
	if cfg.Address.IsValid() {
		where = "host on " + cfg.Address.String()
	}
	h, err := newHost(cfg)
	if err != nil {
		return nil, fmt.Errorf("enet: create %s: %w", where, err)
	}
	return h, nil
}

func newHost(cfg Config) (*Host, error) {
	if cfg.Peers < 1 || cfg.Peers > MaxPeers {
		return nil, fmt.Errorf("peers %d out of range 1..%d", cfg.Peers, MaxPeers)
	}
	if cfg.Channels < 0 || cfg.Channels > MaxChannels {
		return nil, fmt.Errorf("channels %d out of range 0..%d", cfg.Channels, MaxChannels)
	}
	if cfg.MaximumPacketSize < 0 {
		return nil, fmt.Errorf("maximum packet size %d must be >= 0", cfg.MaximumPacketSize)
	}
	if cfg.MaximumWaitingData < 0 {
		return nil, fmt.Errorf("maximum waiting data %d must be >= 0", cfg.MaximumWaitingData)
	}
	if err := cfg.ConnectRate.validate(); err != nil {
		return nil, err
	}
	var bind *C.ENetAddress
	if cfg.Address.IsValid() {
		a, err := toENet(cfg.Address)
		if err != nil {
			return nil, err
		}
		// ENet copies the address; the Go pointer is not kept.
		bind = &a
	}
	if err := acquireLib(); err != nil {
		return nil, err
	}

	var cerr C.int
	c := C.nfe_host_create(bind, C.size_t(cfg.Peers), C.size_t(cfg.Channels),
		C.enet_uint32(cfg.IncomingBandwidth), C.enet_uint32(cfg.OutgoingBandwidth),
		C.size_t(cfg.MaximumPacketSize), C.size_t(cfg.MaximumWaitingData),
		C.enet_uint32(rand.Uint32()), &cerr)
	if c == nil {
		releaseLib()
		if cerr == 0 {
			return nil, errors.New("enet_host_create failed")
		}
		return nil, syscall.Errno(cerr)
	}
	C.nfe_set_connect_rate(c, C.double(cfg.ConnectRate.PerSecond), C.double(cfg.ConnectRate.Burst))

	h := &Host{c: c}
	if bind != nil {
		// ENet reads the bound address back from the socket, so port 0 shows
		// the port the kernel picked.
		h.addr = fromENet(c.host.address)
	}
	return h, nil
}

// Destroy closes the socket and frees the host and every peer slot; peers'
// queued packets are dropped without events. Packets already delivered stay
// valid until their own Destroy. Destroy is idempotent.
func (h *Host) Destroy() {
	if h.c == nil {
		return
	}
	h.foldTotals()
	C.nfe_host_destroy(h.c)
	h.c = nil
	releaseLib()
}

// Address is the bound address (with the real port when bound to port 0), or
// the zero AddrPort for a client host.
func (h *Host) Address() netip.AddrPort { return h.addr }

// String names the host by its bound address, or "client" when unbound.
func (h *Host) String() string {
	if h.addr.IsValid() {
		return h.addr.String()
	}
	return "client"
}

// Connect starts a connection to addr with channels channels (1..MaxChannels);
// data reaches the remote side as the CONNECT event's Data. The returned peer
// is usable at once, but sends fail until this host reports EventConnect.
func (h *Host) Connect(addr netip.AddrPort, channels int, data uint32) (Peer, error) {
	if h.c == nil {
		return Peer{}, fmt.Errorf("enet: connect to %s: %w", addr, ErrDestroyed)
	}
	if channels < 1 || channels > MaxChannels {
		return Peer{}, fmt.Errorf("enet: connect to %s: channels %d out of range 1..%d", addr, channels, MaxChannels)
	}
	if addr.Port() == 0 {
		return Peer{}, fmt.Errorf("enet: connect to %s: no port", addr)
	}
	a, err := toENet(addr)
	if err != nil {
		return Peer{}, fmt.Errorf("enet: connect to %s: %w", addr, err)
	}
	p := C.enet_host_connect(h.c.host, &a, C.size_t(channels), C.enet_uint32(data))
	if p == nil {
		return Peer{}, fmt.Errorf("enet: connect to %s: no free peer slot (of %d)", addr, h.c.host.peerCount)
	}
	return Peer{p: p}, nil
}

// Service sends queued data, receives datagrams and waits up to timeout for an
// event, which it writes to ev. It reports whether an event arrived. A packet
// still held by ev from an earlier call is destroyed first, so a caller that
// keeps a packet's bytes copies them out (Packet.CopyTo) before servicing the
// same Event again. Once warm, Service allocates nothing.
func (h *Host) Service(ev *Event, timeout time.Duration) (bool, error) {
	ev.Packet.Destroy()
	if h.c == nil {
		ev.clear()
		return false, fmt.Errorf("enet: service: %w", ErrDestroyed)
	}
	if C.nfe_host_service(h.c, millis(timeout)) < 0 {
		ev.clear()
		return false, fmt.Errorf("enet: service host %s: %w", h, syscall.Errno(h.c.last_errno))
	}
	return h.fill(ev), nil
}

// CheckEvents is Service without socket I/O or waiting: it returns an event
// already queued by an earlier Service, if any. The same packet rule applies.
func (h *Host) CheckEvents(ev *Event) (bool, error) {
	ev.Packet.Destroy()
	if h.c == nil {
		ev.clear()
		return false, fmt.Errorf("enet: check events: %w", ErrDestroyed)
	}
	if C.nfe_host_check_events(h.c) < 0 {
		ev.clear()
		return false, fmt.Errorf("enet: check events on host %s: enet_host_check_events failed", h)
	}
	return h.fill(ev), nil
}

func (h *Host) fill(ev *Event) bool {
	e := &h.c.event
	ev.Type = EventType(e._type)
	ev.Peer = Peer{p: e.peer}
	ev.Channel = uint8(e.channelID)
	ev.Data = uint32(e.data)
	ev.Packet = Packet{p: e.packet}
	return ev.Type != EventNone
}

// Flush sends everything queued on every peer now, without receiving.
func (h *Host) Flush() {
	if h.c != nil {
		C.enet_host_flush(h.c.host)
	}
}

// Totals returns the host's cumulative traffic. ENet's own counters are 32-bit,
// so each call folds them into 64-bit totals and zeroes them; call it at least
// once per 4 GiB of traffic (a metrics scrape or a tick is plenty).
func (h *Host) Totals() Totals {
	h.foldTotals()
	return h.totals
}

func (h *Host) foldTotals() {
	if h.c == nil {
		return
	}
	c := h.c.host
	h.totals.SentBytes += uint64(c.totalSentData)
	h.totals.SentPackets += uint64(c.totalSentPackets)
	h.totals.ReceivedBytes += uint64(c.totalReceivedData)
	h.totals.ReceivedPackets += uint64(c.totalReceivedPackets)
	c.totalSentData, c.totalSentPackets = 0, 0
	c.totalReceivedData, c.totalReceivedPackets = 0, 0
}

// PeerCount is the number of peer slots (Config.Peers).
func (h *Host) PeerCount() int {
	if h.c == nil {
		return 0
	}
	return int(h.c.host.peerCount)
}

// Peer returns the peer in slot (0..PeerCount-1), whatever its state, or the
// zero Peer when slot is out of range.
func (h *Host) Peer(slot int) Peer {
	if h.c == nil || slot < 0 || slot >= int(h.c.host.peerCount) {
		return Peer{}
	}
	return Peer{p: (*C.ENetPeer)(unsafe.Add(unsafe.Pointer(h.c.host.peers), uintptr(slot)*C.sizeof_ENetPeer))}
}

// ConnectedPeers counts the peers that completed the handshake and have not
// disconnected.
func (h *Host) ConnectedPeers() int {
	if h.c == nil {
		return 0
	}
	return int(h.c.host.connectedPeers)
}

// SetConnectRate changes the per-source CONNECT limit while the host runs;
// perSecond 0 with burst 0 turns it off. Buckets already tracked keep their
// tokens, capped at the new burst.
func (h *Host) SetConnectRate(perSecond float64, burst int) error {
	r := ConnectRate{PerSecond: perSecond, Burst: burst}
	if err := r.validate(); err != nil {
		return fmt.Errorf("enet: set connect rate on host %s: %w", h, err)
	}
	if h.c == nil {
		return fmt.Errorf("enet: set connect rate: %w", ErrDestroyed)
	}
	C.nfe_set_connect_rate(h.c, C.double(perSecond), C.double(burst))
	return nil
}

// ConnectRefusals counts CONNECT datagrams dropped by the rate limiter.
func (h *Host) ConnectRefusals() uint64 {
	if h.c == nil {
		return 0
	}
	return uint64(C.nfe_connect_refusals(h.c))
}

// MalformedDatagrams counts datagrams dropped before ENet parsed them: too
// short for an ENet header, flagged compressed (no netfleet host decompresses)
// or larger than ENet's 4096-byte receive buffer.
func (h *Host) MalformedDatagrams() uint64 {
	if h.c == nil {
		return 0
	}
	return uint64(C.nfe_malformed(h.c))
}

// toENet converts an IPv4 (or IPv4-mapped) address to ENet's form: host in
// network byte order, port in host byte order.
func toENet(ap netip.AddrPort) (C.ENetAddress, error) {
	ip := ap.Addr().Unmap()
	if !ip.Is4() {
		return C.ENetAddress{}, fmt.Errorf("address %s is not IPv4 (libenet 1.3 is IPv4 only)", ap)
	}
	var a C.ENetAddress
	*(*[4]byte)(unsafe.Pointer(&a.host)) = ip.As4()
	a.port = C.enet_uint16(ap.Port())
	return a, nil
}

func fromENet(a C.ENetAddress) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4(*(*[4]byte)(unsafe.Pointer(&a.host))), uint16(a.port))
}
