package session

import "github.com/netfleet/netfleet/gameserver/snapshot"

// FramePool holds the frames every session of a server builds into, under one byte budget
// (memory.framePoolBudgetBytes). Frames are allocated on demand until the budget is reached and
// then reused; Get never allocates past the budget: it returns nil, and the session asking is
// skipped for that tick (its next frame carries what it missed). It is not safe for concurrent
// use; the tick loop owns it.
type FramePool struct {
	budget   int64
	frameCap int
	held     int64 // bytes of every frame allocated and not yet dropped: in use or free
	inUse    int
	free     []*snapshot.Frame
	refused  uint64
}

// NewFramePool returns an empty pool of frames of frameBytes under budget bytes.
func NewFramePool(budget int64, frameBytes int) *FramePool {
	p := &FramePool{}
	p.Configure(budget, frameBytes)
	return p
}

// Configure changes the budget and the frame size. Free frames of another size are dropped now;
// frames in use of another size are dropped when they come back. It is the live-reconfig path
// and may free memory, never allocate.
func (p *FramePool) Configure(budget int64, frameBytes int) {
	p.budget, p.frameCap = budget, frameBytes
	kept := p.free[:0]
	for _, f := range p.free {
		if f.Cap() == frameBytes && p.held <= budget {
			kept = append(kept, f)
			continue
		}
		p.held -= int64(f.Cap())
	}
	clear(p.free[len(kept):])
	p.free = kept
}

// Get returns a frame, or nil when the budget is exhausted.
func (p *FramePool) Get() *snapshot.Frame {
	if n := len(p.free); n > 0 {
		f := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.inUse++
		return f
	}
	if p.held+int64(p.frameCap) > p.budget {
		p.refused++
		return nil
	}
	p.held += int64(p.frameCap)
	p.inUse++
	return snapshot.NewFrame(p.frameCap)
}

// Put returns a frame taken with Get.
func (p *FramePool) Put(f *snapshot.Frame) {
	p.inUse--
	if f.Cap() != p.frameCap || p.held > p.budget {
		p.held -= int64(f.Cap())
		return
	}
	p.free = append(p.free, f)
}

// FramePoolStats describe a FramePool.
type FramePoolStats struct {
	BudgetBytes int64
	HeldBytes   int64 // allocated frames, in use or free
	InUse       int
	Free        int
	Refused     uint64 // Gets refused for want of budget
}

// Stats returns the pool's figures.
func (p *FramePool) Stats() FramePoolStats {
	return FramePoolStats{BudgetBytes: p.budget, HeldBytes: p.held, InUse: p.inUse, Free: len(p.free), Refused: p.refused}
}
