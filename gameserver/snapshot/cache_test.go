package snapshot

import (
	"bytes"
	"runtime"
	"sync"
	"testing"

	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/world"
)

// TestCachedRecordsMatchEncoding: sessions whose clients acknowledge after different delays, up
// to 21 ticks (baselines of more ages than the cache has ways, so its entries are contended),
// send exactly the bytes that the same sessions send when each has a cache of its own, which a
// session never hits (it encodes a replica once a tick): every record encoded afresh.
func TestCachedRecordsMatchEncoding(t *testing.T) {
	run := func(shared bool) []byte {
		cfg := testConfig()
		cfg.InterestRadius = 400 // every session sees most of the world: records are shared
		h := newHarness(t, busyWorld(31), cfg)
		for i := range 6 {
			l := h.addLink(2400*(i%3), 50*(i%2), 1+4*i)
			if !shared {
				l.sess.cache = newRecordCache(h.w.Capacity())
			}
		}
		var out []byte
		for tick := range 200 {
			d := float32(dt)
			if tick%50 > 45 {
				d = 0 // quiet ticks: states equal to their baselines
			}
			h.tick(d)
			for _, l := range h.links {
				for i := range l.frame.Packets() {
					out = append(out, l.frame.Packet(i)...)
				}
			}
		}
		for _, l := range h.links {
			if l.sess.Stats().Deltas == 0 {
				t.Fatal("no deltas sent")
			}
		}
		return out
	}
	if !bytes.Equal(run(true), run(false)) {
		t.Fatal("sessions sharing the record cache sent other bytes than sessions encoding every record")
	}
}

// TestConcurrentBuildsShareCache: sessions built concurrently, filling and reading the shared
// record cache at once, send the bytes the same sessions send when built one at a time.
func TestConcurrentBuildsShareCache(t *testing.T) {
	run := func(concurrent bool) [][]byte {
		cfg := testConfig()
		cfg.InterestRadius = 400 // every session sees most of the world: records are shared
		w, err := world.New(busyWorld(33))
		if err != nil {
			t.Fatal(err)
		}
		sessions := make([]*Session, 8)
		frames := make([]*Frame, len(sessions))
		for i := range sessions {
			if sessions[i], err = NewSession(w, cfg); err != nil {
				t.Fatal(err)
			}
			id, err := w.AddAvatar()
			if err != nil {
				t.Fatal(err)
			}
			sessions[i].SetFocus(id)
			frames[i] = NewFrame(1 << 16)
		}
		var out [][]byte
		for range 60 {
			w.Step(dt)
			if concurrent {
				var wg sync.WaitGroup
				for i, s := range sessions {
					wg.Go(func() {
						if err := s.BuildFrame(2400, 0, frames[i]); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
			} else {
				for i, s := range sessions {
					if err := s.BuildFrame(2400, 0, frames[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i, s := range sessions {
				f := frames[i]
				for p := range f.Packets() {
					out = append(out, bytes.Clone(f.Packet(p)))
				}
				if f.Packets() > 0 {
					a := protocol.Ack{Latest: s.nextSeq - 1, Received: 1<<f.Packets() - 1, LastAppliedTick: w.Tick()}
					if _, err := s.HandleAck(&a); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		return out
	}
	seq, con := run(false), run(true)
	if len(seq) != len(con) {
		t.Fatalf("%d packets built one at a time, %d concurrently", len(seq), len(con))
	}
	for i := range seq {
		if !bytes.Equal(seq[i], con[i]) {
			t.Fatalf("packet %d differs when sessions are built concurrently", i)
		}
	}
}

// TestCachePerWorld: sessions of one world share a cache, another world has its own, and a
// world's cache is dropped once the world is collected.
func TestCachePerWorld(t *testing.T) {
	newWorld := func() *world.World {
		w, err := world.New(world.Config{Seed: 1, Capacity: 64, Population: 8})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w1, w2 := newWorld(), newWorld()
	a, _ := NewSession(w1, testConfig())
	b, _ := NewSession(w1, testConfig())
	c, _ := NewSession(w2, testConfig())
	if a.cache != b.cache || a.cache == c.cache || len(a.cache.entries) != w1.Capacity()*cacheWays {
		t.Fatal("sessions of one world do not share one cache of the world's size")
	}
	entries := func() int {
		worlds.Lock()
		defer worlds.Unlock()
		return len(worlds.m)
	}
	before := entries()
	func() {
		w := newWorld()
		if _, err := NewSession(w, testConfig()); err != nil {
			t.Fatal(err)
		}
		if entries() != before+1 {
			t.Fatal("a new world's cache was not registered")
		}
	}()
	// Cleanups run after the collection that finds the world unreachable.
	for i := 0; i < 100 && entries() > before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if entries() > before {
		t.Fatal("the cache of a collected world is still registered")
	}
	runtime.KeepAlive(w1)
	runtime.KeepAlive(w2)
}
