package session

// Rate-class policy constants.
const (
	// escalateSkips is how many skips in a row move a session to the next slower rate class.
	escalateSkips = 2
	// episodeEndServes is how many serves in a row, without a skip, end a stall episode.
	episodeEndServes = 4
	// relaxAfterMs is how long a session must go without a skip before its rate class is relaxed
	// one step toward its declared class.
	relaxAfterMs = 1000
)

// ClassOf maps a declared rate class to one the server serves: 2 and 4 stand, anything else is 1.
func ClassOf(declared int) int {
	if declared == 2 || declared == 4 {
		return declared
	}
	return 1
}

// ConnectDataRateClass packs a declared rate class into ENet connect data: bits 24 to 27, leaving
// the low 24 bits to the game. A client that is content with fewer snapshots — a spectator, a
// dashboard — declares class 2 or 4 when it connects.
func ConnectDataRateClass(data uint32, class int) uint32 {
	return data&^(0xf<<24) | uint32(ClassOf(class))<<24
}

// DeclaredRateClass reads the rate class a peer declared in its connect data (1 if none).
func DeclaredRateClass(data uint32) int { return ClassOf(int(data >> 24 & 0xf)) }

// rateClass is a session's rate class and stall accounting.
//
// A session is served on every class-th tick (phase-shifted by its slot, so classes spread the
// load over ticks). A due session that cannot be served is skipped; escalateSkips skips in a row
// move it to the next class (1 -> 2 -> 4). The first skip after a clean period starts a stall
// episode, which episodeEndServes serves in a row end; a skip that finds the episode
// backpressure.closeStalledAfterMs old closes the session with protocol.CloseStalled. A class
// above the declared one is relaxed one step after relaxAfterMs without a skip.
type rateClass struct {
	declared  int
	class     int
	phase     uint64
	skips     int // skips in a row
	escalate  int // skips in a row since the last escalation
	serves    int // serves in a row
	episode   bool
	startMs   int64 // start of the episode
	lastSkip  int64 // time of the last skip
	lastShift int64 // time of the last class change
	runStart  uint64
}

func (r *rateClass) reset(declared int, phase uint64, nowMs int64) {
	*r = rateClass{declared: ClassOf(declared), phase: phase, lastSkip: nowMs, lastShift: nowMs}
	r.class = r.declared
}

// interval is how many ticks apart the session may be served; overload serves declared classes
// half as often.
func (r *rateClass) interval(overloaded bool) uint64 {
	n := uint64(r.class)
	if overloaded && r.declared > 1 {
		n *= 2
	}
	return n
}

// due reports whether tick is one of the session's ticks.
func (r *rateClass) due(tick uint64, overloaded bool) bool {
	return (tick+r.phase)%r.interval(overloaded) == 0
}

// skip records a skipped due tick and reports whether the session has been stalled for too long.
func (r *rateClass) skip(tick uint64, nowMs, closeAfterMs int64) bool {
	if r.skips == 0 {
		r.runStart = tick
	}
	r.skips++
	r.serves = 0
	r.lastSkip = nowMs
	if !r.episode {
		r.episode, r.startMs = true, nowMs
	}
	r.escalate++
	if r.escalate >= escalateSkips && r.class < 4 {
		r.class *= 2
		r.escalate = 0
		r.lastShift = nowMs
	}
	return nowMs-r.startMs >= closeAfterMs
}

// serve records a served due tick and returns how many ticks the skip run it ends lasted (0 if
// there was none).
func (r *rateClass) serve(tick uint64, nowMs int64) uint64 {
	var run uint64
	if r.skips > 0 {
		run = tick - r.runStart
	}
	r.skips, r.escalate = 0, 0
	r.serves++
	if r.episode && r.serves >= episodeEndServes {
		r.episode = false
	}
	r.relax(nowMs)
	return run
}

// relax moves a class above the declared one a step back once no skip came for relaxAfterMs.
func (r *rateClass) relax(nowMs int64) {
	if r.class > r.declared && nowMs-r.lastSkip >= relaxAfterMs && nowMs-r.lastShift >= relaxAfterMs {
		r.class /= 2
		r.lastShift = nowMs
	}
}
