package arena

import (
	"testing"
	"time"

	"github.com/netfleet/netfleet/gameserver/game"
)

// fakeLifecycle records the calls of the game.
type fakeLifecycle struct {
	capacity int
	counters map[string]int64
	calls    []string
}

func (f *fakeLifecycle) Ready() error { f.calls = append(f.calls, "ready"); return nil }
func (f *fakeLifecycle) Reserve(time.Duration) error {
	f.calls = append(f.calls, "reserve")
	return nil
}
func (f *fakeLifecycle) Shutdown() error         { f.calls = append(f.calls, "shutdown"); return nil }
func (f *fakeLifecycle) SetCapacity(n int) error { f.capacity = n; return nil }
func (f *fakeLifecycle) SetCounter(n string, v int64) error {
	if f.counters == nil {
		f.counters = map[string]int64{}
	}
	f.counters[n] = v
	return nil
}

func TestMatchEnds(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    string
	}{
		{`{"matchSeconds":1}`, "ready"},
		{`{"matchSeconds":1,"end":"shutdown"}`, "shutdown"},
		{``, ""},
		{`not json`, ""},
	} {
		lc := &fakeLifecycle{}
		g, err := New(Config{MaxPlayers: 8, Lifecycle: lc})
		if err != nil {
			t.Fatal(err)
		}
		if lc.capacity != 8 {
			t.Fatalf("capacity %d, want MaxPlayers", lc.capacity)
		}
		var _ game.Allocatable = g
		g.Allocated(game.Allocation{Name: "m", UID: "u", Payload: tc.payload})
		if a, on, _ := g.Match(); !on || a.UID != "u" {
			t.Fatalf("%q: match %+v on %v", tc.payload, a, on)
		}
		for i := range 2 * 60 {
			tick := game.NewTick(uint32(i+1), 1.0/60, g.Store(), nil)
			g.Step(&tick)
		}
		got := ""
		if len(lc.calls) > 0 {
			got = lc.calls[0]
		}
		if got != tc.want || len(lc.calls) > 1 {
			t.Errorf("%q: lifecycle calls %v, want %q", tc.payload, lc.calls, tc.want)
		}
		if _, _, err := g.Match(); (err != nil) != (tc.payload == "not json") {
			t.Errorf("%q: match error %v", tc.payload, err)
		}
		if lc.counters[CounterMatches] != 1 {
			t.Errorf("%q: counters %v", tc.payload, lc.counters)
		}
	}
}
