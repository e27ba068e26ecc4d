package snapshot

import "github.com/netfleet/netfleet/gameserver/protocol"

// Frame is what one view's client is sent for one tick: zero or more SNAPSHOT packets, preceded
// by a RESET message when the view was reset. Its buffer is fixed at NewFrame; building into a
// reused Frame allocates nothing once warm.
type Frame struct {
	tick     uint32
	firstSeq uint16
	buf      []byte
	ends     []int
	reset    []byte
	// resetBuf is its own allocation, not an array inside Frame: a RESET is handed to cgo, which
	// refuses memory that holds Go pointers, as Frame does.
	resetBuf []byte
}

// NewFrame returns a frame that holds up to capacity bytes of packets (backpressure.frameBytes).
func NewFrame(capacity int) *Frame {
	return &Frame{
		buf:      make([]byte, capacity),
		ends:     make([]int, 0, capacity/protocol.MinSnapshotBytes/8+1),
		resetBuf: make([]byte, 0, protocol.ResetBytes),
	}
}

func (f *Frame) clear(tick uint32) {
	f.tick = tick
	f.ends = f.ends[:0]
	f.reset = nil
}

// Tick is the tick the frame was built for.
func (f *Frame) Tick() uint32 { return f.tick }

// Cap is the frame's capacity in bytes.
func (f *Frame) Cap() int { return len(f.buf) }

// Packets is the number of SNAPSHOT packets.
func (f *Frame) Packets() int { return len(f.ends) }

// Packet returns packet i, to be sent unreliably. It aliases the frame's buffer.
func (f *Frame) Packet(i int) []byte {
	start := 0
	if i > 0 {
		start = f.ends[i-1]
	}
	return f.buf[start:f.ends[i]]
}

// Seq is the sequence number of packet i; a frame's packets are numbered consecutively. The tick
// loop feeds it to the application-level loss estimator when the packet is sent.
func (f *Frame) Seq(i int) uint16 { return f.firstSeq + uint16(i) }

// Bytes is the total size of the frame's packets.
func (f *Frame) Bytes() int {
	if len(f.ends) == 0 {
		return 0
	}
	return f.ends[len(f.ends)-1]
}

// ResetMessage returns the RESET message to send reliably along with the frame's packets; nil
// when the view was not reset. The packets carry FlagReset too, so the order they arrive in does
// not matter.
func (f *Frame) ResetMessage() []byte { return f.reset }
