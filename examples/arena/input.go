package arena

import (
	"encoding/binary"
	"errors"
	"math"
)

// Input kinds, the first byte of a COMMAND payload.
const (
	InputWalk = 1 // then x, y float32: walk to (x, y)
	InputFire = 2 // then yaw float32: fire toward yaw radians
)

// ErrBadInput is returned by DecodeInput for a payload that is not an arena input.
var ErrBadInput = errors.New("arena: not an arena input")

// AppendWalk appends a walk to (x, y) meters to dst.
func AppendWalk(dst []byte, x, y float32) []byte {
	dst = append(dst, InputWalk)
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(y))
}

// AppendFire appends a fire toward yaw radians to dst.
func AppendFire(dst []byte, yaw float32) []byte {
	dst = append(dst, InputFire)
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(yaw))
}

// DecodeInput decodes an input: a walk's point (x, y), or a fire's yaw (in x). It refuses any
// other kind or length, and values that are not finite.
func DecodeInput(p []byte) (kind int, x, y float32, err error) {
	switch {
	case len(p) == 9 && p[0] == InputWalk:
		x = math.Float32frombits(binary.LittleEndian.Uint32(p[1:]))
		y = math.Float32frombits(binary.LittleEndian.Uint32(p[5:]))
	case len(p) == 5 && p[0] == InputFire:
		x = math.Float32frombits(binary.LittleEndian.Uint32(p[1:]))
	default:
		return 0, 0, 0, ErrBadInput
	}
	if x-x != 0 || y-y != 0 {
		return 0, 0, 0, ErrBadInput
	}
	return int(p[0]), x, y, nil
}
