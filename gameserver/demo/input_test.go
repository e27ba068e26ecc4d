package demo

import (
	"errors"
	"math"
	"testing"
)

func TestMoveRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		x, y float32
		err  error
	}{
		{"move", AppendMove(nil, 12.5, -3), 12.5, -3, nil},
		{"empty", nil, 0, 0, ErrBadInput},
		{"short", AppendMove(nil, 1, 2)[:8], 0, 0, ErrBadInput},
		{"long", append(AppendMove(nil, 1, 2), 0), 0, 0, ErrBadInput},
		{"other kind", append([]byte{2}, AppendMove(nil, 1, 2)[1:]...), 0, 0, ErrBadInput},
		{"NaN", AppendMove(nil, float32(math.NaN()), 2), 0, 0, ErrBadInput},
		{"Inf", AppendMove(nil, 1, float32(math.Inf(-1))), 0, 0, ErrBadInput},
	}
	for _, tc := range cases {
		x, y, err := DecodeMove(tc.in)
		if !errors.Is(err, tc.err) || x != tc.x || y != tc.y {
			t.Errorf("%s: (%v, %v, %v), want (%v, %v, %v)", tc.name, x, y, err, tc.x, tc.y, tc.err)
		}
	}
}

func FuzzDecodeMove(f *testing.F) {
	f.Add(AppendMove(nil, 1, 2))
	f.Add([]byte{InputMove})
	f.Fuzz(func(t *testing.T, p []byte) {
		x, y, err := DecodeMove(p)
		if err != nil {
			return
		}
		if back := AppendMove(nil, x, y); string(back) != string(p) {
			t.Fatalf("decoded (%v, %v) re-encodes differently", x, y)
		}
	})
}
