package entity

import (
	"math"
	"slices"
)

// grid is a uniform grid over the world's horizontal plane, rebuilt every tick by counting sort.
// Entities are stored in cell order with their coordinates alongside, so a query reads each row
// of cells as one contiguous run.
type grid struct {
	half   float32
	inv    float32 // 1 / cell size
	n      int     // cells per side
	start  []int32 // start[c] is the first index of cell c; start[n*n] is the entity count
	cursor []int32
	cellOf []int32 // per slot, its cell in the rebuild under way; -1 for a dead slot
	slots  []uint16
	xs, ys []float32
	none   []uint8 // a slot bitmap with no slot set: query's known set
}

func newGrid(half, cell float32, capacity int) grid {
	n := int((2*half)/cell) + 1
	return grid{
		half:   half,
		inv:    1 / cell,
		n:      n,
		start:  make([]int32, n*n+1),
		cursor: make([]int32, n*n),
		cellOf: make([]int32, capacity),
		slots:  make([]uint16, capacity),
		xs:     make([]float32, capacity),
		ys:     make([]float32, capacity),
		none:   make([]uint8, (capacity+7)/8),
	}
}

// cell returns the cell coordinate of v on one axis, clamped to the grid.
func (g *grid) cell(v float32) int {
	c := int((v + g.half) * g.inv)
	return max(0, min(g.n-1, c))
}

// rebuild puts the live entities that have a position in their cells at their committed positions
// (SlotMeta.X, Y): it counts them per cell, then places them, finding each entity's cell once.
func (g *grid) rebuild(meta []SlotMeta, vis []Visibility) {
	clear(g.start)
	cellOf := g.cellOf[:len(meta)]
	for s := range meta {
		c := int32(-1)
		if meta[s].Alive && (!meta[s].Special || !vis[s].placeless) {
			c = int32(g.cell(meta[s].Y)*g.n + g.cell(meta[s].X))
			g.start[c+1]++
		}
		cellOf[s] = c
	}
	for c := 1; c < len(g.start); c++ {
		g.start[c] += g.start[c-1]
	}
	copy(g.cursor, g.start)
	for s, c := range cellOf {
		if c < 0 {
			continue
		}
		i := g.cursor[c]
		g.cursor[c]++
		g.slots[i], g.xs[i], g.ys[i] = uint16(s), meta[s].X, meta[s].Y
	}
}

// query appends every entity within radius of (x, y).
func (g *grid) query(x, y, radius float32, out []Hit) []Hit {
	return g.queryNew(x, y, radius, g.none, out)
}

// queryNew is query without the entities whose slot bit is set in known, which is tested before
// the distance: a viewer that tracks most entities around it finds the few new ones cheaply.
//
// It reads, in each row of cells, only the cells the circle reaches (the corners of its bounding
// square hold about a fifth of the entities in it, and none within radius), and appends to out
// with no call in the loop over entities, whose values then stay in registers.
func (g *grid) queryNew(x, y, radius float32, known []uint8, out []Hit) []Hit {
	r2 := radius * radius
	// The circle's half width over a row is taken at the row's y nearest to y, with slack for
	// rounding: of d2 (relative, well under 1e-5) and of the cell bounds (far under a centimeter).
	// The outer rows also hold the entities beyond the grid.
	cell, slack := 1/float64(g.inv), float64(r2)*(1+1e-5)
	for cy := g.cell(y - radius); cy <= g.cell(y+radius); cy++ {
		dy := 0.0
		if top := float64(cy)*cell - float64(g.half); cy > 0 && float64(y) < top {
			dy = top - float64(y)
		} else if bottom := top + cell; cy < g.n-1 && float64(y) > bottom {
			dy = float64(y) - bottom
		}
		dy = max(0, dy-0.01)
		half := float32(math.Sqrt(max(0, slack-dy*dy))) + 0.01
		row := cy * g.n
		lo, hi := g.start[row+g.cell(x-half)], g.start[row+g.cell(x+half)+1]
		slots := g.slots[lo:hi]
		n := len(out)
		out = slices.Grow(out, len(slots))
		out = out[:n+scanNew(out[n:n+len(slots)], slots, g.xs[lo:hi], g.ys[lo:hi], x, y, r2, known)]
	}
	return out
}

// scanNew puts in hits the entities of slots, at xs and ys, within r2 of (x, y) whose slot bit is
// not set in known, and returns how many. hits has room for every slot. It is the inner loop of
// queryNew, a function of its own so that its few values stay in registers.
func scanNew(hits []Hit, slots []uint16, xs, ys []float32, x, y, r2 float32, known []uint8) int {
	xs, ys = xs[:len(slots)], ys[:len(slots)]
	bit := [8]uint8{1, 2, 4, 8, 16, 32, 64, 128} // on the stack: a table, but no register for its address
	k := 0
	for i, s := range slots {
		if known[s>>3]&bit[s&7] != 0 {
			continue
		}
		dx, dy := xs[i]-x, ys[i]-y
		if d2 := dx*dx + dy*dy; d2 <= r2 {
			hits[k] = Hit{Slot: s, Dist2: d2}
			k++
		}
	}
	return k
}
