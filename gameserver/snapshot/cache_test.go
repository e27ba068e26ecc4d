package snapshot

import (
	"bytes"
	"sync"
	"testing"

	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/protocol"
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
				l.sess.cache = newRecordCache(h.st.Capacity())
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
		w, err := demo.NewWorld(busyWorld(33))
		if err != nil {
			t.Fatal(err)
		}
		sh := NewShared(w.Store().Capacity())
		sessions := make([]*View, 8)
		frames := make([]*Frame, len(sessions))
		for i := range sessions {
			if sessions[i], err = NewView(w.Store(), sh, cfg); err != nil {
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
						if _, err := s.BuildFrame(2400, 0, frames[i]); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
			} else {
				for i, s := range sessions {
					if _, err := s.BuildFrame(2400, 0, frames[i]); err != nil {
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
					a := protocol.Ack{Latest: s.nextSeq - 1, Received: 1<<f.Packets() - 1, LastAppliedTick: w.Store().Tick()}
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

// TestViewsShareCache: the views made with one Shared share one record cache of the store's
// size.
func TestViewsShareCache(t *testing.T) {
	h := newHarness(t, busyWorld(1), testConfig())
	a, b := h.view(testConfig()), h.view(testConfig())
	other := NewShared(h.st.Capacity())
	c, err := NewView(h.st, other, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if a.cache != b.cache || a.cache == c.cache || a.scratch != b.scratch || len(a.cache.entries) != h.st.Capacity()*cacheWays {
		t.Fatal("views made with one Shared do not share one cache of the store's size")
	}
}
