package enet

/*
#include "nfenet.h"
*/
import "C"

// EventType says what a serviced event carries.
type EventType int

// Event types.
const (
	// EventNone: nothing happened within the timeout.
	EventNone EventType = C.ENET_EVENT_TYPE_NONE
	// EventConnect: a connection completed; Data is the connect data the
	// connecting side passed to Host.Connect.
	EventConnect EventType = C.ENET_EVENT_TYPE_CONNECT
	// EventDisconnect: a peer disconnected or timed out; Data is the remote
	// side's disconnect data (0 on a timeout). The slot is free again.
	EventDisconnect EventType = C.ENET_EVENT_TYPE_DISCONNECT
	// EventReceive: Packet arrived from Peer on Channel.
	EventReceive EventType = C.ENET_EVENT_TYPE_RECEIVE
)

// String returns the type's name, e.g. "receive".
func (t EventType) String() string {
	switch t {
	case EventNone:
		return "none"
	case EventConnect:
		return "connect"
	case EventDisconnect:
		return "disconnect"
	case EventReceive:
		return "receive"
	}
	return "unknown"
}

// Event is filled by Host.Service and Host.CheckEvents. Callers keep one Event
// per servicing loop and reuse it, so the receive path allocates nothing. An
// Event holding a packet must not be copied (see Packet).
type Event struct {
	Type    EventType
	Peer    Peer
	Channel uint8  // receive only
	Data    uint32 // connect and disconnect only
	Packet  Packet // receive only; owned by the Event until destroyed
}

func (ev *Event) clear() {
	*ev = Event{}
}
