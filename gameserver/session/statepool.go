package session

import (
	"github.com/netfleet/netfleet/gameserver/snapshot"
)

// StateBytesPerEntity is what replication state costs per entity a session tracks: the replica
// record, its stored baseline, its acknowledgement mark and its share of the per-tick scratch
// (interest query, candidates, order), about 75 to 85 bytes with the slack of growing arrays,
// rounded up.
const StateBytesPerEntity = 96

// StatePool holds the replication state of a server's sessions — a snapshot.View each, with
// its per-entity state — under memory.statePoolBudgetBytes. A session that ends gives its state
// back for the next one to reuse; the pool keeps it only while the pool is within budget.
//
// The budget is enforced on the state in use: every active session's base (a fresh session's
// bytes) plus StateBytesPerEntity per tracked entity. A new session is refused when its base does
// not fit. When the sessions' growth exhausts the pool, StatePolicy degrades the farthest band of
// the largest sessions first.
type StatePool struct {
	e       snapshot.Entities
	shared  *snapshot.Shared
	cfg     snapshot.Config
	budget  int64
	base    int
	spare   []*snapshot.View
	refused uint64
}

// NewStatePool returns a pool for the views of e under budget bytes; sh is what they share. It
// builds one view to measure a fresh view's bytes, and keeps it as the first spare.
func NewStatePool(e snapshot.Entities, sh *snapshot.Shared, cfg snapshot.Config, budget int64) (*StatePool, error) {
	s, err := snapshot.NewView(e, sh, cfg)
	if err != nil {
		return nil, err
	}
	return &StatePool{e: e, shared: sh, cfg: cfg, budget: budget, base: s.MemoryBytes(), spare: []*snapshot.View{s}}, nil
}

// BaseBytes is a fresh session's state, the least a session holds.
func (p *StatePool) BaseBytes() int { return p.base }

// Budget is the pool's budget in bytes.
func (p *StatePool) Budget() int64 { return p.budget }

// Configure changes the budget and the replication config new sessions are made with.
func (p *StatePool) Configure(budget int64, cfg snapshot.Config) {
	p.budget, p.cfg = budget, cfg
}

// Get returns replication state for a new session, given the state the active sessions use now;
// it refuses (nil) when a fresh session's base would not fit the budget. It reuses a spare when
// there is one and allocates otherwise, which only a connecting peer does.
func (p *StatePool) Get(inUse int64) *snapshot.View {
	if inUse+int64(p.base) > p.budget {
		p.refused++
		return nil
	}
	if n := len(p.spare); n > 0 {
		s := p.spare[n-1]
		p.spare[n-1] = nil
		p.spare = p.spare[:n-1]
		return s
	}
	s, err := snapshot.NewView(p.e, p.shared, p.cfg)
	if err != nil {
		// The config was validated when it was installed.
		p.refused++
		return nil
	}
	return s
}

// Put takes back an ended session's state, given the state the active sessions use now. The
// state is kept for reuse only while the spares and the active sessions fit the budget; else it
// is dropped for the garbage collector.
func (p *StatePool) Put(s *snapshot.View, inUse int64) {
	s.Recycle()
	if inUse+p.spareBytes()+int64(s.MemoryBytes()) > p.budget {
		return
	}
	p.spare = append(p.spare, s)
}

func (p *StatePool) spareBytes() int64 {
	var n int64
	for _, s := range p.spare {
		n += int64(s.MemoryBytes())
	}
	return n
}

// StatePoolStats describe a StatePool.
type StatePoolStats struct {
	BudgetBytes int64
	BaseBytes   int
	Spares      int
	SpareBytes  int64
	Refused     uint64 // sessions refused for want of budget
}

// Stats returns the pool's figures.
func (p *StatePool) Stats() StatePoolStats {
	return StatePoolStats{BudgetBytes: p.budget, BaseBytes: p.base, Spares: len(p.spare), SpareBytes: p.spareBytes(), Refused: p.refused}
}

// stateLevels are the detail levels the state policy holds a session at, in order: the far band
// first (level 4, 75% radius), then the last level (50% radius).
var stateLevels = [...]int{0, 4, MaxLevel}

// StatePolicy keeps the replication state in use within the state pool's budget.
//
// Each tick it sums the state in use. Over budget, it moves the session tracking the most
// entities one step down stateLevels — its far band leaves its interest, properly despawned, so
// its client's view stays exact within the smaller radius — and then waits half a second for the
// despawns to be acknowledged and the state to shrink before it takes the next step, so the
// largest sessions give up their farthest band first and only as many as needed. Under 90% of the
// budget, and no sooner than a second after the last change, it gives one step back to the
// degraded session tracking the fewest entities. A budget smaller than what every session needs at the last level leaves them there;
// nothing is ever dropped from a view that is in interest.
type StatePolicy struct {
	lastChange uint64
	inUse      int64
}

// InUse is the state in use found by the last Step.
func (sp *StatePolicy) InUse() int64 { return sp.inUse }

// Step applies the policy to the active sessions for tick and returns the state in use.
func (sp *StatePolicy) Step(tick uint64, tickRateHz int, sessions []*Session, pool *StatePool) int64 {
	var inUse int64
	var largest, smallest *Session
	for _, s := range sessions {
		if !s.Active() {
			continue
		}
		inUse += s.stateInUse(pool.base)
		if s.stepOf() < len(stateLevels)-1 && (largest == nil || s.snap.Known() > largest.snap.Known()) {
			largest = s
		}
		if s.stepOf() > 0 && (smallest == nil || s.snap.Known() < smallest.snap.Known()) {
			smallest = s
		}
	}
	sp.inUse = inUse
	switch {
	case inUse > pool.budget && largest != nil && tick-sp.lastChange >= uint64(max(tickRateHz/2, 1)):
		largest.SetStatePressure(stateLevels[largest.stepOf()+1])
		sp.lastChange = tick
	case inUse < pool.budget/10*9 && smallest != nil && tick-sp.lastChange >= uint64(tickRateHz):
		smallest.SetStatePressure(stateLevels[smallest.stepOf()-1])
		sp.lastChange = tick
	}
	return inUse
}

// stateInUse is the replication state the session uses: a fresh session's base and its tracked
// entities.
func (s *Session) stateInUse(base int) int64 {
	return int64(base) + int64(s.snap.Known())*StateBytesPerEntity
}

// stepOf is the session's position in stateLevels.
func (s *Session) stepOf() int {
	for i := len(stateLevels) - 1; i > 0; i-- {
		if s.pressure >= stateLevels[i] {
			return i
		}
	}
	return 0
}
