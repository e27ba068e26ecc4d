package protocol

import "errors"

// Version is the protocol version carried in the high nibble of every message's first byte.
const Version = 1

// MsgType is a message's type, the low nibble of its first byte.
type MsgType uint8

// Message types. Zero is not a type, so an all-zero buffer is refused.
const (
	MsgSnapshot MsgType = 1 // server -> client, unreliable
	MsgReset    MsgType = 2 // server -> client, reliable
	MsgAck      MsgType = 3 // client -> server
	MsgPing     MsgType = 4 // client -> server
	MsgCommand  MsgType = 5 // client -> server
	MsgHello    MsgType = 6 // client -> server, reliable, the first message
	MsgClose    MsgType = 7 // server -> client, reliable, before a refusal's disconnect
)

func (t MsgType) String() string {
	switch t {
	case MsgSnapshot:
		return "SNAPSHOT"
	case MsgReset:
		return "RESET"
	case MsgAck:
		return "ACK"
	case MsgPing:
		return "PING"
	case MsgCommand:
		return "COMMAND"
	case MsgHello:
		return "HELLO"
	case MsgClose:
		return "CLOSE"
	}
	return "UNKNOWN"
}

// Close reasons, sent as ENet disconnect data when the server closes a session.
const (
	// CloseGoingAway: the server is shutting down or the session ended normally.
	CloseGoingAway = 1001
	// CloseAbuse: the client kept sending more than its inbound budget allows.
	CloseAbuse = 1008
	// CloseStalled: the session could not keep up for too long.
	CloseStalled = 1013
	// CloseGameError: the game failed to admit the client (it named an entity that does not
	// exist); the server logs the game's error.
	CloseGameError = 1011
	// CloseNoPing: the client stopped sending PING.
	CloseNoPing = 4001
	// CloseHandshake: the client sent no HELLO in time, or a malformed one.
	CloseHandshake = 4002
	// CloseRefused: the game refused the client's join, or removed the player.
	CloseRefused = 4003
	// CloseSchema: the client's schema is not the server's (its HELLO named another hash).
	CloseSchema = 4004
	// The connect-token refusals (docs/connect-tokens.md): CloseTokenMissing, the server requires
	// a token and the HELLO carried none; CloseTokenInvalid, a malformed token or one not signed
	// by the fleet's key; CloseTokenExpired, a token past its deadline; CloseTokenWrongServer and
	// CloseTokenWrongAllocation, a token for another server or another match;
	// CloseTokenReplayed, a token already used from another address.
	CloseTokenMissing         = 4005
	CloseTokenInvalid         = 4006
	CloseTokenExpired         = 4007
	CloseTokenWrongServer     = 4008
	CloseTokenWrongAllocation = 4009
	CloseTokenReplayed        = 4010
	// CloseGameMin and CloseGameMax bound the codes a game may choose for refusing or removing a
	// player (game.Refusal); their meaning is the game's. Codes 4000 to 4099 are netfleet's.
	CloseGameMin = 4100
	CloseGameMax = 4999
)

// Limits that are part of the wire format.
const (
	// MaxEntities bounds entity ids: an id is below MaxEntities.
	MaxEntities = 1 << 16
	// HistoryDepth is how many received states per entity a client keeps to resolve deltas.
	HistoryDepth = 16
	// MaxBaselineAge is the oldest baseline a delta can name, in ticks before the packet's tick.
	MaxBaselineAge = 1024
	// AckWindow is how many sequences before the latest one an ACK acknowledges.
	AckWindow = 64
	// MaxNeedFull is how many entity ids one ACK can ask full state for.
	MaxNeedFull = 32
	// MaxCommandPayload is the largest COMMAND payload, in bytes.
	MaxCommandPayload = 255
)

// Errors. Decoders return one of these (or ErrTruncated) for a malformed message and never
// panic; ErrPayloadLimit is the encoders' refusal of a COMMAND payload that is too large.
var (
	ErrEmpty        = errors.New("protocol: empty message")
	ErrVersion      = errors.New("protocol: unsupported protocol version")
	ErrType         = errors.New("protocol: unexpected message type")
	ErrTrailing     = errors.New("protocol: trailing bytes or non-zero padding after message")
	ErrInvalid      = errors.New("protocol: invalid field value")
	ErrTooMany      = errors.New("protocol: too many entries in message")
	ErrPayloadLimit = errors.New("protocol: COMMAND payload over MaxCommandPayload")
)

// PeekType returns the type of the message in b after checking its version; it does not check
// the rest of the message.
func PeekType(b []byte) (MsgType, error) {
	if len(b) == 0 {
		return 0, ErrEmpty
	}
	if b[0]>>4 != Version {
		return 0, ErrVersion
	}
	return MsgType(b[0] & 0x0f), nil
}

func typeByte(t MsgType) uint64 { return Version<<4 | uint64(t) }

// beginDecode resets r over b and checks the first byte's version and type.
func beginDecode(r *BitReader, b []byte, want MsgType) error {
	t, err := PeekType(b)
	if err != nil {
		return err
	}
	if t != want {
		return ErrType
	}
	r.Reset(b)
	r.ReadBits(8)
	return nil
}

// endDecode checks that r read all of its input but zero padding.
func endDecode(r *BitReader) error {
	if err := r.Err(); err != nil {
		return err
	}
	pad := r.Remaining()
	if pad >= 8 || r.ReadBits(uint(pad)) != 0 {
		return ErrTrailing
	}
	return nil
}
