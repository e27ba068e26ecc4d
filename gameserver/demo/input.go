package demo

import (
	"encoding/binary"
	"errors"
	"math"
)

// The demo game's input, carried in COMMAND payloads. The wire protocol treats a payload as
// opaque; this is the one input the demo world understands.
const (
	// InputMove asks the sender's avatar to walk to a point: kind byte, then x and y in meters as
	// little-endian float32.
	InputMove = 1

	moveBytes = 9
)

// ErrBadInput is returned by DecodeMove for a payload that is not a valid move input.
var ErrBadInput = errors.New("demo: not a move input")

// AppendMove appends a move input to (x, y) meters to dst.
func AppendMove(dst []byte, x, y float32) []byte {
	dst = append(dst, InputMove)
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(y))
}

// DecodeMove decodes a move input. It refuses any other length or kind, and coordinates that are
// not finite.
func DecodeMove(p []byte) (x, y float32, err error) {
	if len(p) != moveBytes || p[0] != InputMove {
		return 0, 0, ErrBadInput
	}
	x = math.Float32frombits(binary.LittleEndian.Uint32(p[1:]))
	y = math.Float32frombits(binary.LittleEndian.Uint32(p[5:]))
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || math.IsNaN(float64(y)) || math.IsInf(float64(y), 0) {
		return 0, 0, ErrBadInput
	}
	return x, y, nil
}
