package protocol

import "math"

// Quantization constants. They are part of the wire format.
const (
	// PosUnitsPerMeter is the position resolution: 1/64 m.
	PosUnitsPerMeter = 64
	// PosBits is the width of one quantized position axis.
	PosBits = 18
	// PosMin and PosMax bound a quantized position axis: ±2048 m.
	PosMin = -1 << (PosBits - 1)
	PosMax = 1<<(PosBits-1) - 1
	// WorldHalfExtent is the largest representable distance from the origin on any axis, in
	// meters.
	WorldHalfExtent = 2048

	// VelUnitsPerMeterPerSecond is the velocity resolution: 1/64 m/s.
	VelUnitsPerMeterPerSecond = 64
	// VelBits is the width of one quantized velocity axis.
	VelBits = 14
	// VelMin and VelMax bound a quantized velocity axis: ±128 m/s.
	VelMin = -1 << (VelBits - 1)
	VelMax = 1<<(VelBits-1) - 1

	// RotComponentBits is the width of each of the three smallest quaternion components.
	RotComponentBits = 10
	rotComponentMax  = 1<<RotComponentBits - 1
)

// State is an entity's replicated state, quantized. Two States are equal exactly when the client
// would show the same thing, so the server compares States to decide what changed.
type State struct {
	Pos [3]int32 // PosMin..PosMax, 1/64 m
	Rot uint32   // smallest-three quaternion, see PackRotation
	Vel [3]int16 // VelMin..VelMax, 1/64 m/s
}

// QuantizePos converts meters to position units, rounding to nearest and clamping to the world.
func QuantizePos(m float32) int32 {
	return roundClamp(float64(m)*PosUnitsPerMeter, PosMin, PosMax)
}

// DequantizePos converts position units to meters.
func DequantizePos(u int32) float32 { return float32(u) / PosUnitsPerMeter }

// QuantizeVel converts meters per second to velocity units, rounding and clamping.
func QuantizeVel(mps float32) int16 {
	return int16(roundClamp(float64(mps)*VelUnitsPerMeterPerSecond, VelMin, VelMax))
}

// roundClamp rounds v to the nearest integer (ties up) within [lo, hi]; NaN gives lo. It shifts v
// positive and truncates, which is a few instructions, where math.Round or math.Floor is a call
// on baseline amd64; quantization runs for every entity every tick.
func roundClamp(v float64, lo, hi int32) int32 {
	const shift = 1 << 20 // above -lo for every caller
	switch {
	case !(v >= float64(lo)):
		return lo
	case v >= float64(hi):
		return hi
	}
	return int32(int64(v+0.5+shift) - shift)
}

// DequantizeVel converts velocity units to meters per second.
func DequantizeVel(u int16) float32 { return float32(u) / VelUnitsPerMeterPerSecond }

func clamp(v, lo, hi float64) float64 {
	if v < lo || math.IsNaN(v) {
		return lo
	}
	return min(v, hi)
}

// rotRange bounds the three smallest components of a unit quaternion: |c| <= 1/√2.
const rotRange = math.Sqrt2 / 2

// PackRotation quantizes a quaternion (x, y, z, w), which need not be normalized, as smallest
// three: the index of the largest-magnitude component in the top 2 bits, then the other three in
// order, sign-flipped so the dropped one is positive (q and -q are the same rotation).
func PackRotation(x, y, z, w float64) uint32 {
	q := [4]float64{x, y, z, w}
	n := math.Sqrt(x*x + y*y + z*z + w*w)
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		q, n = [4]float64{0, 0, 0, 1}, 1
	}
	big := 0
	for i := 1; i < 4; i++ {
		if math.Abs(q[i]) > math.Abs(q[big]) {
			big = i
		}
	}
	sign := 1 / n
	if q[big] < 0 {
		sign = -sign
	}
	packed := uint32(big) << (3 * RotComponentBits)
	shift := uint(2 * RotComponentBits)
	for i := range 4 {
		if i == big {
			continue
		}
		c := clamp(q[i]*sign, -rotRange, rotRange)
		u := uint32(math.Round((c + rotRange) / (2 * rotRange) * rotComponentMax))
		packed |= u << shift
		shift -= RotComponentBits
	}
	return packed
}

// UnpackRotation returns the normalized quaternion (x, y, z, w) of a packed rotation. Any 32-bit
// value unpacks to a unit quaternion.
func UnpackRotation(p uint32) (x, y, z, w float64) {
	big := int(p >> (3 * RotComponentBits))
	var q [4]float64
	shift := uint(2 * RotComponentBits)
	sum := 0.0
	for i := range 4 {
		if i == big {
			continue
		}
		u := (p >> shift) & rotComponentMax
		q[i] = float64(u)/rotComponentMax*(2*rotRange) - rotRange
		sum += q[i] * q[i]
		shift -= RotComponentBits
	}
	q[big] = math.Sqrt(math.Max(0, 1-sum))
	n := math.Sqrt(sum + q[big]*q[big])
	return q[0] / n, q[1] / n, q[2] / n, q[3] / n
}

// YawRotation packs the rotation of angle yaw (radians) about the vertical (Z) axis.
func YawRotation(yaw float64) uint32 {
	s, c := math.Sincos(yaw / 2)
	return PackRotation(0, 0, s, c)
}
