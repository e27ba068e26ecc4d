package enet

/*
#include "nfenet.h"
*/
import "C"

import "unsafe"

// PacketFlags select how a packet is delivered. The zero value is unreliable
// and sequenced: it may be lost, and a late one is dropped rather than
// delivered out of order.
type PacketFlags uint32

// Delivery flags.
const (
	// Unreliable packets may be lost; late ones are dropped.
	Unreliable PacketFlags = 0
	// Reliable packets are resent until acknowledged and arrive in order.
	Reliable PacketFlags = C.ENET_PACKET_FLAG_RELIABLE
	// Unsequenced packets may be lost and may arrive in any order.
	Unsequenced PacketFlags = C.ENET_PACKET_FLAG_UNSEQUENCED
	// UnreliableFragment fragments an oversize unreliable packet with
	// unreliable sends instead of making it reliable.
	UnreliableFragment PacketFlags = C.ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT
)

const knownFlags = Reliable | Unsequenced | UnreliableFragment

// Packet is a received ENet packet, held in C memory until Destroy.
//
// Lifetime: the packet belongs to the Event it arrived in. Bytes is a view of
// the C buffer, valid only until Destroy (or until the Event is serviced
// again, which destroys a packet still held). Copy anything needed later with
// CopyTo. Destroy frees it exactly once: it clears the Packet, so a second
// Destroy does nothing. Because of that guard a Packet must not be copied;
// use it through its Event.
type Packet struct {
	p *C.ENetPacket // nil once destroyed
}

// Bytes returns the packet's data without copying; nil after Destroy.
func (pk *Packet) Bytes() []byte {
	if pk.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(pk.p.data)), int(pk.p.dataLength))
}

// Len returns the packet's length in bytes; 0 after Destroy.
func (pk *Packet) Len() int {
	if pk.p == nil {
		return 0
	}
	return int(pk.p.dataLength)
}

// CopyTo copies the packet's data into dst and returns the bytes copied
// (the shorter of the two lengths).
func (pk *Packet) CopyTo(dst []byte) int {
	return copy(dst, pk.Bytes())
}

// Destroy frees the packet. It is safe to call more than once.
func (pk *Packet) Destroy() {
	if pk.p == nil {
		return
	}
	C.enet_packet_destroy(pk.p)
	pk.p = nil
}
