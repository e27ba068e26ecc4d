package broadcast

import "time"

// Overload detection thresholds.
const (
	// overloadWorkFraction: a tick whose work takes more than this share of the tick period, or
	// that starts more than a period late, runs late.
	overloadWorkFraction = 0.9
	// overloadEnterTicks late ticks in a row enter overload mode.
	overloadEnterTicks = 3
	// overloadCalmFraction: a tick whose work takes less than this share of the period, and that
	// starts on time, is calm; a second of calm ticks in a row leaves overload mode.
	overloadCalmFraction = 0.5
)

// overload tracks whether the tick loop runs late. In overload mode every session is served a
// detail level lower and declared rate classes half as often (session.Now.Overloaded), which
// takes work off the tick until it is calm again; the hysteresis between entering (a few late
// ticks) and leaving (a second of calm ones) keeps the mode from flapping.
type overload struct {
	on    bool
	late  int // late ticks in a row
	calm  int // calm ticks in a row
	spans uint64
}

func (o *overload) observe(work, late, period time.Duration, tickRateHz int) {
	isLate := float64(work) > overloadWorkFraction*float64(period) || late > period
	isCalm := float64(work) < overloadCalmFraction*float64(period) && late < period/2
	switch {
	case isLate:
		o.late++
		o.calm = 0
	case isCalm:
		o.calm++
		o.late = 0
	default:
		o.late, o.calm = 0, 0
	}
	if !o.on && o.late >= overloadEnterTicks {
		o.on = true
		o.spans++
	}
	if o.on && o.calm >= tickRateHz {
		o.on = false
	}
}
