package linkem

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseProfile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Profile
		err  string
	}{
		{name: "empty object is clean", in: `{}`, want: Profile{Up: Impairment{JitterDist: JitterUniform}, Down: Impairment{JitterDist: JitterUniform}}},
		{
			name: "shorthand applies downstream",
			in:   `{"loss": 0.05, "delayMs": 80}`,
			want: Profile{Up: Impairment{JitterDist: JitterUniform}, Down: Impairment{Loss: 0.05, DelayMs: 80, JitterDist: JitterUniform}},
		},
		{
			name: "yaml, both directions, defaults filled",
			in:   "up:\n  delayMs: 10\ndown:\n  rateBytesPerSec: 20000\n  reorder: 0.1\n",
			want: Profile{
				Up:   Impairment{DelayMs: 10, JitterDist: JitterUniform},
				Down: Impairment{RateBytesPerSec: 20000, QueueMs: DefaultQueueMs, Reorder: 0.1, ReorderDelayMs: DefaultReorderDelayMs, JitterDist: JitterUniform},
			},
		},
		{
			name: "shorthand with up",
			in:   `{"jitterMs": 3, "jitterDist": "normal", "up": {"duplicate": 0.5}}`,
			want: Profile{Up: Impairment{Duplicate: 0.5, JitterDist: JitterUniform}, Down: Impairment{JitterMs: 3, JitterDist: JitterNormal}},
		},
		{
			name: "queue bytes keeps no time limit",
			in:   `{"rateBytesPerSec": 1000, "queueBytes": 5000}`,
			want: Profile{Up: Impairment{JitterDist: JitterUniform}, Down: Impairment{RateBytesPerSec: 1000, QueueBytes: 5000, JitterDist: JitterUniform}},
		},
		{
			name: "gilbert-elliott",
			in:   `{"gilbertElliott": {"p": 0.01, "r": 0.3, "lossGood": 0, "lossBad": 0.8}}`,
			want: Profile{Up: Impairment{JitterDist: JitterUniform}, Down: Impairment{GilbertElliott: &GilbertElliott{P: 0.01, R: 0.3, LossBad: 0.8}, JitterDist: JitterUniform}},
		},
		{
			name: "policer, its bucket defaulted",
			in:   `{"policerBytesPerSec": 100000}`,
			want: Profile{Up: Impairment{JitterDist: JitterUniform}, Down: Impairment{PolicerBytesPerSec: 100000, PolicerBurstBytes: 5000, JitterDist: JitterUniform}},
		},
		{
			name: "slow policer's bucket holds a packet",
			in:   `{"policerBytesPerSec": 1000}`,
			want: Profile{Up: Impairment{JitterDist: JitterUniform}, Down: Impairment{PolicerBytesPerSec: 1000, PolicerBurstBytes: 1500, JitterDist: JitterUniform}},
		},
		{name: "bucket without a policer", in: `{"policerBurstBytes": 5000}`, err: "needs policerBytesPerSec"},
		{name: "negative policer", in: `{"policerBytesPerSec": -1}`, err: "policerBytesPerSec"},
		{name: "shorthand and down", in: `{"loss": 0.1, "down": {"loss": 0.2}}`, err: "both given"},
		{name: "unknown field", in: `{"los": 0.1}`, err: "unknown field"},
		{name: "unknown nested field", in: `{"up": {"delay": 5}}`, err: "unknown field"},
		{name: "duplicate key", in: "loss: 0.1\nloss: 0.2\n", err: "parse"},
		{name: "loss above 1", in: `{"loss": 1.5}`, err: "down.loss: 1.5 is outside [0, 1]"},
		{name: "negative delay", in: `{"up": {"delayMs": -1}}`, err: "up.delayMs"},
		{name: "huge delay", in: `{"delayMs": 1e9}`, err: "delayMs"},
		{name: "bad dist", in: `{"jitterDist": "pareto"}`, err: "jitterDist"},
		{name: "burst below 1", in: `{"loss": 0.1, "lossBurst": 0.5}`, err: "lossBurst"},
		{name: "burst with total loss", in: `{"loss": 1, "lossBurst": 3}`, err: "lossBurst"},
		{name: "ge with loss", in: `{"loss": 0.1, "gilbertElliott": {"p": 0.1, "r": 0.1}}`, err: "excludes"},
		{name: "ge stuck", in: `{"gilbertElliott": {"p": 0, "r": 0}}`, err: "both be 0"},
		{name: "ge out of range", in: `{"gilbertElliott": {"p": 2, "r": 0}}`, err: "gilbertElliott.p"},
		{name: "queue without rate", in: `{"queueMs": 50}`, err: "needs rateBytesPerSec"},
		{name: "negative rate", in: `{"rateBytesPerSec": -5}`, err: "rateBytesPerSec"},
		{name: "negative queue bytes", in: `{"rateBytesPerSec": 5, "queueBytes": -1}`, err: "queueBytes"},
		{name: "not an object", in: `[1]`, err: "profile"},
		{name: "not yaml", in: "{", err: "parse"},
		{name: "wrong type", in: `{"loss": "lots"}`, err: "profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProfile([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			// What the control API prints reads back as the same profile.
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseProfile(b)
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("round trip through %s: %+v, %v", b, back, err)
			}
		})
	}
}

func TestParseSelector(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.5:4000")
	tests := []struct {
		in, canon string
		picks     []int // indexes (with address a) it picks among 0..3; nil for profile slots
		err       string
	}{
		{in: "default", canon: "default"},
		{in: "class:lossy", canon: "class:lossy"},
		{in: "client:2", canon: "client:2", picks: []int{2}},
		{in: "client:1-3", canon: "client:1-3", picks: []int{1, 2, 3}},
		{in: "client:2-2", canon: "client:2", picks: []int{2}},
		{in: "addr:127.0.0.5", canon: "addr:127.0.0.5", picks: []int{0, 1, 2, 3}},
		{in: "addr:127.0.0.5:4000", canon: "addr:127.0.0.5:4000", picks: []int{0, 1, 2, 3}},
		{in: "addr:127.0.0.5:4001", canon: "addr:127.0.0.5:4001", picks: []int{}},
		{in: "addr:[::ffff:127.0.0.5]:4000", canon: "addr:127.0.0.5:4000", picks: []int{0, 1, 2, 3}},
		{in: "addr:::1", canon: "addr:::1", picks: []int{}},
		{in: "", err: "want default"},
		{in: "default:x", err: "no argument"},
		{in: "class:", err: "class name"},
		{in: "class:a b", err: "class name"},
		{in: "client:", err: "client index"},
		{in: "client:-1", err: "client index"},
		{in: "client:3-1", err: "N <= M"},
		{in: "client:1-x", err: "client index"},
		{in: "addr:nowhere", err: "neither IP"},
		{in: "addr:127.0.0.1:0", err: "port 0"},
		{in: "host:1", err: "want default"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			sel, err := ParseSelector(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.String() != tt.canon {
				t.Errorf("String() = %q, want %q", sel, tt.canon)
			}
			if back, err := ParseSelector(sel.String()); err != nil || back != sel {
				t.Errorf("round trip: %v, %v", back, err)
			}
			if sel.picksClients() != (tt.picks != nil) {
				t.Fatalf("picksClients() = %v", sel.picksClients())
			}
			var picked []int
			for i := range 4 {
				if sel.matches(i, a) {
					picked = append(picked, i)
				}
			}
			if !slices.Equal(picked, tt.picks) {
				t.Errorf("picks %v, want %v", picked, tt.picks)
			}
		})
	}
}

func TestParseSchedule(t *testing.T) {
	good := `
classes:
  lossy: {loss: 0.01}
  capped: {down: {rateBytesPerSec: 20000}}
rules:
  - {select: "client:0-3", class: lossy}
  - {select: "addr:127.0.0.9", class: capped}
steps:
  - {at: 10s, select: "class:lossy", profile: {loss: 0.05, delayMs: 80}}
  - {at: 1500ms, select: "client:2", profile: {up: {delayMs: 5}}}
  - {at: 20s, select: "client:2", reset: true}
`
	s, err := ParseSchedule([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Classes) != 2 || len(s.Rules) != 2 || s.Rules[1].Select.String() != "addr:127.0.0.9" {
		t.Errorf("parsed %+v", s)
	}
	var ats []time.Duration
	for _, st := range s.sortedSteps() {
		ats = append(ats, time.Duration(st.At))
	}
	if !reflect.DeepEqual(ats, []time.Duration{1500 * time.Millisecond, 10 * time.Second, 20 * time.Second}) {
		t.Errorf("step order %v", ats)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ParseSchedule(b); err != nil || !reflect.DeepEqual(back, s) {
		t.Errorf("round trip through %s: %v", b, err)
	}

	bad := []struct{ name, in, err string }{
		{"unknown key", "step: []", "unknown field"},
		{"bad duration", `steps: [{at: soon, select: default, profile: {}}]`, "duration"},
		{"number duration", `steps: [{at: 10, select: default, profile: {}}]`, "duration"},
		{"negative at", `steps: [{at: -1s, select: default, profile: {}}]`, "negative"},
		{"no select", `steps: [{at: 1s, profile: {}}]`, "empty selector"},
		{"bad select", `steps: [{at: 1s, select: "client:x", profile: {}}]`, "client index"},
		{"neither", `steps: [{at: 1s, select: default}]`, "neither profile nor reset"},
		{"both", `steps: [{at: 1s, select: "client:1", reset: true, profile: {}}]`, "both given"},
		{"reset class", `steps: [{at: 1s, select: "class:x", reset: true}]`, "not a client"},
		{"bad step profile", `steps: [{at: 1s, select: default, profile: {loss: 3}}]`, "steps[0]: profile.down.loss"},
		{"bad class profile", `classes: {x: {delayMs: -3}}`, "classes.x.down.delayMs"},
		{"bad class name", `classes: {"a b": {}}`, "class name"},
		{"rule to unknown class", `rules: [{select: "client:0", class: nope}]`, "not in classes"},
		{"rule on a class", `{classes: {x: {}}, rules: [{select: "class:x", class: x}]}`, "must pick clients"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSchedule([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
	if _, err := LoadSchedule("/nonexistent/plan.yaml"); err == nil {
		t.Error("missing file accepted")
	}
}

func FuzzParseProfile(f *testing.F) {
	for _, s := range []string{`{}`, `{"loss": 0.05}`, `{"up": {"rateBytesPerSec": 5, "queueBytes": 9}}`, "down:\n  delayMs: 3\n", `{"gilbertElliott": {"p": 1, "r": 1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted an invalid profile: %v", err)
		}
		// Any accepted profile drives the model without trouble.
		for d, imp := range []Impairment{p.Up, p.Down} {
			l := newLink(1, 0, direction(d))
			l.setImpairment(imp)
			for i := range 50 {
				deps, n := l.admit(int64(i)*int64(time.Millisecond), 1200)
				for _, dep := range deps[:n] {
					if dep < int64(i)*int64(time.Millisecond) {
						t.Fatalf("packet %d leaves before it arrived", i)
					}
				}
			}
		}
	})
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"default", "class:a", "client:1-2", "addr:127.0.0.1:5", "addr:::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			return
		}
		back, err := ParseSelector(sel.String())
		if err != nil || back != sel {
			t.Fatalf("%q -> %q does not read back: %v", s, sel, err)
		}
	})
}

func FuzzParseSchedule(f *testing.F) {
	f.Add([]byte(`{classes: {a: {}}, rules: [{select: "client:0", class: a}], steps: [{at: 1s, select: "class:a", profile: {loss: 0.5}}]}`))
	f.Add([]byte("steps:\n- at: 2s\n  select: client:1\n  reset: true\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSchedule(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid schedule: %v", err)
		}
	})
}
