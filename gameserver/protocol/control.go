package protocol

import (
	"errors"
	"slices"
)

// Reset tells the client to drop its view: every entity whose newest record is older than Tick
// and every history entry older than Tick. The server then sends full state from Tick on. The
// server sends it reliably; snapshot packets of Tick carry FlagReset too, so a client resets on
// whichever arrives first.
type Reset struct {
	Tick uint32
}

// ResetBytes is the encoded size of a RESET.
const ResetBytes = 5

// AppendReset appends the encoded RESET to dst.
func AppendReset(dst []byte, m *Reset) []byte {
	var w BitWriter
	dst, start := beginAppend(&w, dst, ResetBytes)
	w.WriteBits(typeByte(MsgReset), 8)
	w.WriteBits(uint64(m.Tick), 32)
	return endAppend(&w, dst, start)
}

// DecodeReset decodes a RESET.
func DecodeReset(b []byte, m *Reset) error {
	var r BitReader
	if err := beginDecode(&r, b, MsgReset); err != nil {
		return err
	}
	m.Tick = uint32(r.ReadBits(32))
	return endDecode(&r)
}

// AckState is what a client's next ACK says it received: the newest SNAPSHOT sequence and,
// bit i of Received, sequence Latest-1-i. The zero value has received nothing.
type AckState struct {
	Latest   uint16
	Received uint64
	// Any is set once a packet was received.
	Any bool
}

// Receive records the receipt of SNAPSHOT packet seq. A duplicate, or a packet older than the
// AckWindow before the newest, changes nothing.
func (a *AckState) Receive(seq uint16) {
	if !a.Any {
		a.Any, a.Latest, a.Received = true, seq, 0
		return
	}
	switch d := int16(seq - a.Latest); {
	case d > 0:
		a.Received = a.Received<<d | 1<<(d-1) // shifts of 64 or more give 0
		a.Latest = seq
	case d < 0 && d >= -AckWindow:
		a.Received |= 1 << (-d - 1)
	}
}

// Ack acknowledges received SNAPSHOT packets: Latest is the newest sequence received, bit i of
// Received is set when sequence Latest-1-i was received (AckWindow sequences in all). Every
// ACK repeats the whole window, so losing some ACKs loses no acknowledgement.
type Ack struct {
	Latest          uint16
	Received        uint64
	LastAppliedTick uint32 // newest tick the client applied a SNAPSHOT packet of
	// Resync asks the server to RESET the view: the client could not list every entity it needs
	// full state for.
	Resync   bool
	needFull [MaxNeedFull]uint16
	nNeed    uint8
}

const (
	ackFlagResync = 1
	ackMaxBytes   = 17 + 2*MaxNeedFull
)

// NeedFull lists the entities whose records the client could not apply for want of the baseline
// they named; the server answers with their full state.
func (a *Ack) NeedFull() []uint16 { return a.needFull[:a.nNeed] }

// AddNeedFull adds id to NeedFull; it reports false when NeedFull already holds MaxNeedFull ids.
func (a *Ack) AddNeedFull(id uint16) bool {
	if int(a.nNeed) == MaxNeedFull {
		return false
	}
	a.needFull[a.nNeed] = id
	a.nNeed++
	return true
}

// AppendAck appends the encoded ACK to dst.
func AppendAck(dst []byte, a *Ack) []byte {
	var w BitWriter
	dst, start := beginAppend(&w, dst, ackMaxBytes)
	w.WriteBits(typeByte(MsgAck), 8)
	w.WriteBits(uint64(a.Latest), 16)
	w.WriteBits(a.Received&0xffffffff, 32)
	w.WriteBits(a.Received>>32, 32)
	w.WriteBits(uint64(a.LastAppliedTick), 32)
	var flags uint64
	if a.Resync {
		flags |= ackFlagResync
	}
	w.WriteBits(flags, 8)
	w.WriteBits(uint64(a.nNeed), 8)
	for _, id := range a.NeedFull() {
		w.WriteBits(uint64(id), 16)
	}
	return endAppend(&w, dst, start)
}

// DecodeAck decodes an ACK into a.
func DecodeAck(b []byte, a *Ack) error {
	var r BitReader
	if err := beginDecode(&r, b, MsgAck); err != nil {
		return err
	}
	a.Latest = uint16(r.ReadBits(16))
	lo := r.ReadBits(32)
	a.Received = lo | r.ReadBits(32)<<32
	a.LastAppliedTick = uint32(r.ReadBits(32))
	flags := r.ReadBits(8)
	if flags&^ackFlagResync != 0 {
		r.Fail(ErrInvalid)
	}
	a.Resync = flags&ackFlagResync != 0
	n := r.ReadBits(8)
	if n > MaxNeedFull {
		r.Fail(ErrTooMany)
	}
	a.nNeed = 0
	for range min(n, MaxNeedFull) {
		a.AddNeedFull(uint16(r.ReadBits(16)))
	}
	return endDecode(&r)
}

// Ping is sent by clients at 4 Hz. The server closes a session that stops pinging
// (CloseNoPing) and skips one whose LastAppliedTick trails too far.
type Ping struct {
	ClientTimeMs    uint32 // client wall clock, unix milliseconds, low 32 bits
	LastAppliedTick uint32
}

const pingBytes = 9

// AppendPing appends the encoded PING to dst.
func AppendPing(dst []byte, p *Ping) []byte {
	var w BitWriter
	dst, start := beginAppend(&w, dst, pingBytes)
	w.WriteBits(typeByte(MsgPing), 8)
	w.WriteBits(uint64(p.ClientTimeMs), 32)
	w.WriteBits(uint64(p.LastAppliedTick), 32)
	return endAppend(&w, dst, start)
}

// DecodePing decodes a PING into p.
func DecodePing(b []byte, p *Ping) error {
	var r BitReader
	if err := beginDecode(&r, b, MsgPing); err != nil {
		return err
	}
	p.ClientTimeMs = uint32(r.ReadBits(32))
	p.LastAppliedTick = uint32(r.ReadBits(32))
	return endDecode(&r)
}

// Command is client input: Seq counts the client's commands, Tick is the newest server tick the
// client had applied when it issued the command, Payload is opaque game input.
type Command struct {
	Seq     uint16
	Tick    uint32
	Payload []byte // at most MaxCommandPayload bytes; DecodeCommand makes it alias its input
}

const commandHeaderBytes = 8

// AppendCommand appends the encoded COMMAND to dst; it refuses a payload over MaxCommandPayload.
func AppendCommand(dst []byte, c *Command) ([]byte, error) {
	if len(c.Payload) > MaxCommandPayload {
		return dst, ErrPayloadLimit
	}
	var w BitWriter
	dst, start := beginAppend(&w, dst, commandHeaderBytes+len(c.Payload))
	w.WriteBits(typeByte(MsgCommand), 8)
	w.WriteBits(uint64(c.Seq), 16)
	w.WriteBits(uint64(c.Tick), 32)
	w.WriteBits(uint64(len(c.Payload)), 8)
	dst = endAppend(&w, dst, start)
	return append(dst, c.Payload...), nil
}

// DecodeCommand decodes a COMMAND into c; c.Payload aliases b.
func DecodeCommand(b []byte, c *Command) error {
	var r BitReader
	if err := beginDecode(&r, b, MsgCommand); err != nil {
		return err
	}
	c.Seq = uint16(r.ReadBits(16))
	c.Tick = uint32(r.ReadBits(32))
	n := int(r.ReadBits(8))
	if err := r.Err(); err != nil {
		return err
	}
	switch {
	case len(b) < commandHeaderBytes+n:
		return ErrTruncated
	case len(b) > commandHeaderBytes+n:
		return ErrTrailing
	}
	c.Payload = b[commandHeaderBytes:]
	return nil
}

// beginAppend grows dst by up to maxBytes (allocating only when its capacity is short) and
// points w at the new room.
func beginAppend(w *BitWriter, dst []byte, maxBytes int) ([]byte, int) {
	start := len(dst)
	dst = slices.Grow(dst, maxBytes)
	w.Reset(dst[start : start+maxBytes])
	return dst, start
}

func endAppend(w *BitWriter, dst []byte, start int) []byte {
	return dst[:start+len(w.Bytes())]
}

// Hello is a client's first message, sent reliably once the ENet connection is up: the server
// starts the client's session only once it has checked it. SchemaHash is the hash of the schema
// the client decodes records with (Schema.Hash); a server of another schema refuses the client
// with CloseSchema, before it sends any record. Token is the client's connect token, if it has
// one (a server that requires tokens refuses a HELLO without one): opaque bytes to the protocol,
// at most MaxTokenBytes.
type Hello struct {
	SchemaHash uint64
	Token      []byte // DecodeHello makes it alias its input
}

// HelloBytes is the encoded size of a HELLO without a token; a token adds 1 byte of length and
// its bytes.
const HelloBytes = 9

// MaxTokenBytes is the longest connect token a HELLO carries.
const MaxTokenBytes = 255

// ErrTokenLimit is the encoder's refusal of a token over MaxTokenBytes.
var ErrTokenLimit = errors.New("protocol: connect token over MaxTokenBytes")

// AppendHello appends the encoded HELLO to dst; it refuses a token over MaxTokenBytes.
func AppendHello(dst []byte, h *Hello) ([]byte, error) {
	if len(h.Token) > MaxTokenBytes {
		return dst, ErrTokenLimit
	}
	var w BitWriter
	dst, start := beginAppend(&w, dst, HelloBytes)
	w.WriteBits(typeByte(MsgHello), 8)
	w.WriteBits(h.SchemaHash, 64)
	dst = endAppend(&w, dst, start)
	if len(h.Token) > 0 {
		dst = append(dst, byte(len(h.Token)))
		dst = append(dst, h.Token...)
	}
	return dst, nil
}

// DecodeHello decodes a HELLO into h: 9 bytes without a token, or 9, a length byte of 1 to
// MaxTokenBytes and the token.
func DecodeHello(b []byte, h *Hello) error {
	if len(b) <= HelloBytes {
		var r BitReader
		if err := beginDecode(&r, b, MsgHello); err != nil {
			return err
		}
		lo := r.ReadBits(32)
		h.SchemaHash, h.Token = lo|r.ReadBits(32)<<32, nil
		return endDecode(&r)
	}
	if err := DecodeHello(b[:HelloBytes], h); err != nil {
		return err
	}
	switch n := int(b[HelloBytes]); {
	case n == 0:
		return ErrInvalid
	case len(b) < HelloBytes+1+n:
		return ErrTruncated
	case len(b) > HelloBytes+1+n:
		return ErrTrailing
	}
	h.Token = b[HelloBytes+1:]
	return nil
}

// Close tells a client why the server is about to disconnect it: the close code the disconnect
// will carry and a human-readable reason. The server sends it reliably before refusing a client
// (a schema mismatch, a refusal of the game), so a client can show what went wrong; the
// disconnect's data is authoritative.
type Close struct {
	Code   uint32
	Reason string // at most MaxCloseReason bytes of UTF-8
}

// MaxCloseReason is the longest Close reason, in bytes.
const MaxCloseReason = 255

// AppendClose appends the encoded CLOSE to dst; a reason over MaxCloseReason bytes is cut.
func AppendClose(dst []byte, c *Close) []byte {
	reason := c.Reason
	if len(reason) > MaxCloseReason {
		reason = reason[:MaxCloseReason]
	}
	var w BitWriter
	dst, start := beginAppend(&w, dst, 6)
	w.WriteBits(typeByte(MsgClose), 8)
	w.WriteBits(uint64(c.Code), 32)
	w.WriteBits(uint64(len(reason)), 8)
	dst = endAppend(&w, dst, start)
	return append(dst, reason...)
}

// DecodeClose decodes a CLOSE into c.
func DecodeClose(b []byte, c *Close) error {
	var r BitReader
	if err := beginDecode(&r, b, MsgClose); err != nil {
		return err
	}
	c.Code = uint32(r.ReadBits(32))
	n := int(r.ReadBits(8))
	if err := r.Err(); err != nil {
		return err
	}
	switch {
	case len(b) < 6+n:
		return ErrTruncated
	case len(b) > 6+n:
		return ErrTrailing
	}
	c.Reason = string(b[6:])
	return nil
}
