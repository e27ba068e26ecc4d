package protocol

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestQuantizePos(t *testing.T) {
	tests := []struct {
		m    float32
		want int32
	}{
		{0, 0},
		{1, 64},
		{-1, -64},
		{0.0078, 0}, // under half a unit
		{0.0079, 1}, // over half a unit
		{2047.98, PosMax},
		{-2048, PosMin},
		{5000, PosMax},
		{-5000, PosMin},
		{float32(math.NaN()), PosMin},
	}
	for _, tt := range tests {
		if got := QuantizePos(tt.m); got != tt.want {
			t.Errorf("QuantizePos(%v) = %d, want %d", tt.m, got, tt.want)
		}
	}
	for _, u := range []int32{PosMin, -1, 0, 1, 12345, PosMax} {
		if got := QuantizePos(DequantizePos(u)); got != u {
			t.Errorf("QuantizePos(DequantizePos(%d)) = %d", u, got)
		}
	}
}

func TestQuantizeVel(t *testing.T) {
	tests := []struct {
		mps  float32
		want int16
	}{{0, 0}, {1, 64}, {-3.5, -224}, {200, VelMax}, {-200, VelMin}}
	for _, tt := range tests {
		if got := QuantizeVel(tt.mps); got != tt.want {
			t.Errorf("QuantizeVel(%v) = %d, want %d", tt.mps, got, tt.want)
		}
		if got := QuantizeVel(DequantizeVel(tt.want)); got != tt.want {
			t.Errorf("QuantizeVel(DequantizeVel(%d)) = %d", tt.want, got)
		}
	}
}

// TestRotationPrecision checks that smallest-three at 10 bits keeps every rotation within a
// fraction of a degree.
func TestRotationPrecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for range 20000 {
		q := [4]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
		for i := range q {
			q[i] /= n
		}
		x, y, z, w := UnpackRotation(PackRotation(q[0], q[1], q[2], q[3]))
		dot := math.Abs(x*q[0] + y*q[1] + z*q[2] + w*q[3])
		angle := 2 * math.Acos(math.Min(1, dot)) * 180 / math.Pi
		worst = math.Max(worst, angle)
	}
	if worst > 0.25 {
		t.Fatalf("worst rotation error %.3f degrees, want <= 0.25", worst)
	}
}

func TestPackRotationDegenerate(t *testing.T) {
	identity := PackRotation(0, 0, 0, 1)
	for _, q := range [][4]float64{{0, 0, 0, 0}, {math.NaN(), 0, 0, 1}, {math.Inf(1), 0, 0, 0}} {
		if got := PackRotation(q[0], q[1], q[2], q[3]); got != identity {
			t.Errorf("PackRotation(%v) = %#x, want identity %#x", q, got, identity)
		}
	}
	if PackRotation(0, 0, 0, -2) != identity {
		t.Error("-q and a scaled q do not pack like q")
	}
	if _, _, z, w := UnpackRotation(YawRotation(math.Pi / 2)); math.Abs(z-math.Sqrt2/2) > 1e-3 || math.Abs(w-math.Sqrt2/2) > 1e-3 {
		t.Errorf("YawRotation(pi/2) unpacks to z=%v w=%v", z, w)
	}
	// Every packed value unpacks to a unit quaternion.
	for _, p := range []uint32{0, 1<<32 - 1, 0x3fffffff, 0xc0000000} {
		x, y, z, w := UnpackRotation(p)
		if n := x*x + y*y + z*z + w*w; math.Abs(n-1) > 1e-9 {
			t.Errorf("UnpackRotation(%#x) has norm² %v", p, n)
		}
	}
}
