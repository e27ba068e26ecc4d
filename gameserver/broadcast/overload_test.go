package broadcast

import (
	"testing"
	"time"
)

// Overload mode is entered after a few late ticks and left only after a second of calm ones.
func TestOverloadHysteresis(t *testing.T) {
	const period = time.Second / 60
	var o overload
	calm, late, busy := period/10, period, period*7/10 // busy: neither late nor calm
	steps := []struct {
		work, lateBy time.Duration
		n            int
		want         bool
	}{
		{calm, 0, 100, false},
		{late, 0, overloadEnterTicks - 1, false},
		{calm, 0, 1, false}, // a calm tick breaks the run
		{late, 0, overloadEnterTicks, true},
		{calm, 2 * period, 5, true}, // started late: not calm, still over a period late
		{calm, 0, 59, true},
		{busy, 0, 1, true}, // a busy tick restarts the calm second
		{calm, 0, 59, true},
		{calm, 0, 1, false},
	}
	for i, s := range steps {
		for range s.n {
			o.observe(s.work, s.lateBy, period, 60)
		}
		if o.on != s.want {
			t.Fatalf("step %d: overloaded %v, want %v", i, o.on, s.want)
		}
	}
	if o.spans != 1 {
		t.Errorf("entered overload %d times, want 1", o.spans)
	}
}
