package snapshot

import (
	"sync"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// scratch holds the arrays a frame build fills and forgets. The views of a store share them:
// a build takes one set and gives it back, so builds one after another reuse the same memory,
// which stays in the CPU's caches, where each view's own copy would be fetched from main
// memory every tick (a server's views together hold more than the caches).
type scratch struct {
	fresh []entity.Hit
	// acked is parallel to the replicas: the newest acknowledged record of each, its tick in
	// bits 16 to 47 and its send count below; 0: none.
	acked  []uint64
	bucket []uint8  // parallel to the replicas: this tick's priority bucket, notCandidate, dropped or other
	cands  []uint16 // replica indices of the candidates, highest priority first
	// candBits and candLen are the candidates' records: a delta of at most 128 bits as its
	// first 64 bits and its length (bits 64 and up of one over 64 bits are in the record cache);
	// a length of 0 or recEncoded marks a record decided when it is emitted.
	candBits []uint64
	candLen  []uint8
	encode   []uint16         // positions in cands of the deltas not in the record cache yet
	states   []protocol.State // the baseline and the current state of each of encode
	counts   [nBuckets]int32
}

// scratchPool holds the idle scratch sets of a store's views: as many as builds ever ran at
// once, so taking one allocates nothing once warm.
type scratchPool struct {
	mu    sync.Mutex
	spare []*scratch
}

func (p *scratchPool) get() *scratch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.spare); n > 0 {
		sc := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return sc
	}
	const initial = 512
	return &scratch{
		fresh:    make([]entity.Hit, 0, initial),
		acked:    make([]uint64, 0, initial),
		bucket:   make([]uint8, 0, initial),
		encode:   make([]uint16, 0, initial),
		states:   make([]protocol.State, 0, 2*initial),
		cands:    make([]uint16, 0, initial),
		candBits: make([]uint64, 0, initial),
		candLen:  make([]uint8, 0, initial),
	}
}

func (p *scratchPool) put(sc *scratch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spare = append(p.spare, sc)
}
