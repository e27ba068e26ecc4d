package world

// grid is a uniform grid over the world's horizontal plane, rebuilt every tick by counting sort.
// Entities are stored in cell order with their coordinates alongside, so a query reads each row
// of cells as one contiguous run.
type grid struct {
	half   float32
	inv    float32 // 1 / cell size
	n      int     // cells per side
	start  []int32 // start[c] is the first index of cell c; start[n*n] is the entity count
	cursor []int32
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

func (g *grid) rebuild(meta []SlotMeta, pos [][3]float32) {
	clear(g.start)
	for s := range meta {
		if meta[s].Alive {
			g.start[g.cell(pos[s][1])*g.n+g.cell(pos[s][0])+1]++
		}
	}
	for c := 1; c < len(g.start); c++ {
		g.start[c] += g.start[c-1]
	}
	copy(g.cursor, g.start)
	for s := range meta {
		if !meta[s].Alive {
			continue
		}
		p := pos[s]
		c := g.cell(p[1])*g.n + g.cell(p[0])
		i := g.cursor[c]
		g.cursor[c]++
		g.slots[i], g.xs[i], g.ys[i] = uint16(s), p[0], p[1]
	}
}

// query appends every entity within radius of (x, y).
func (g *grid) query(x, y, radius float32, out []Hit) []Hit {
	return g.queryNew(x, y, radius, g.none, out)
}

// queryNew is query without the entities whose slot bit is set in known, which is tested before
// the distance: a viewer that tracks most entities around it finds the few new ones cheaply.
func (g *grid) queryNew(x, y, radius float32, known []uint8, out []Hit) []Hit {
	r2 := radius * radius
	x0, x1 := g.cell(x-radius), g.cell(x+radius)
	for cy := g.cell(y - radius); cy <= g.cell(y+radius); cy++ {
		row := cy * g.n
		lo, hi := g.start[row+x0], g.start[row+x1+1]
		xs, ys, slots := g.xs[lo:hi], g.ys[lo:hi], g.slots[lo:hi]
		for i, s := range slots {
			if known[s>>3]&(1<<(s&7)) != 0 {
				continue
			}
			dx, dy := xs[i]-x, ys[i]-y
			if d2 := dx*dx + dy*dy; d2 <= r2 {
				out = append(out, Hit{Slot: s, Dist2: d2})
			}
		}
	}
	return out
}
