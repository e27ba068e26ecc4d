package snapshot

// Stats are a view's cumulative counters.
type Stats struct {
	Frames       uint64 // frames built
	Packets      uint64 // SNAPSHOT packets built
	Bytes        uint64 // bytes of SNAPSHOT packets
	Spawns       uint64 // spawn records
	Deltas       uint64 // delta records
	Despawns     uint64 // despawn records
	PacketsAcked uint64
	PacketsLost  uint64 // unacknowledged with lossReorder newer packets acknowledged, or evicted
	NeedFull     uint64 // entities the client asked full state for
	Resets       uint64
	Candidates   uint64 // entities that had something to send, summed over frames
	// SpawnsDeferred counts spawns left for a later frame by the enter budget
	// (Config.EnterBudgetDivisor), summed over frames.
	SpawnsDeferred uint64
}

// add counts a frame's result.
func (st *Stats) add(r *FrameResult) {
	st.Frames++
	st.Packets += uint64(r.Packets)
	st.Bytes += uint64(r.Bytes)
	st.Spawns += uint64(r.Spawns)
	st.Deltas += uint64(r.Deltas)
	st.Despawns += uint64(r.Despawns)
	st.Candidates += uint64(r.Candidates)
	st.SpawnsDeferred += uint64(r.Deferred)
}

// FrameResult is what building one frame did.
type FrameResult struct {
	// Spawns, Deltas and Despawns count the records written.
	Spawns, Deltas, Despawns int
	// Candidates counts the entities that had something to send; Unchanged those of them whose
	// state turned out to equal the client's baseline (it changed and changed back), which
	// needed no record.
	Candidates, Unchanged int
	// Deferred counts the spawns left for a later frame by the enter budget
	// (Config.EnterBudgetDivisor): candidates that were not sent, but not for want of budget.
	Deferred int
	// Packets and Bytes are the frame's SNAPSHOT packets and their size.
	Packets, Bytes int
}

// Records is the number of records written.
func (r FrameResult) Records() int { return r.Spawns + r.Deltas + r.Despawns }

// Starved reports whether the budget left candidates out of the frame: some had something to
// send and were neither sent, nor unchanged, nor deferred by the enter budget.
func (r FrameResult) Starved() bool { return r.Records()+r.Unchanged+r.Deferred < r.Candidates }

// AckResult is what one ACK resolved, for the application-level loss estimator.
type AckResult struct {
	Acked int // packets newly acknowledged
	Lost  int // packets newly counted lost
}
