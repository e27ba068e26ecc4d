package snapshot

import "github.com/netfleet/netfleet/gameserver/world"

// Pool hands out sessions of one world and takes them back, so a new client reuses the memory of
// one that left instead of allocating. It is not safe for concurrent use.
type Pool struct {
	w    *world.World
	cfg  Config
	free []*Session
}

// NewPool returns a pool with n sessions allocated up front.
func NewPool(w *world.World, cfg Config, n int) (*Pool, error) {
	p := &Pool{w: w, cfg: cfg, free: make([]*Session, 0, n)}
	for range n {
		s, err := NewSession(w, cfg)
		if err != nil {
			return nil, err
		}
		p.free = append(p.free, s)
	}
	return p, nil
}

// Get returns a session with no client history; it allocates one only when the pool is empty.
// The pool's config was validated by NewPool, so Get cannot fail.
func (p *Pool) Get() *Session {
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s
	}
	s, _ := NewSession(p.w, p.cfg)
	return s
}

// Put returns a session to the pool; the session must not be used afterwards.
func (p *Pool) Put(s *Session) {
	s.cfg = p.cfg
	s.Recycle()
	p.free = append(p.free, s)
}
