package congestionlab

import (
	"math"
	"reflect"
	"testing"

	"github.com/netfleet/netfleet/internal/botswarm"
)

func TestSettledFrom(t *testing.T) {
	tests := []struct {
		name     string
		hz       []int
		from, to int
		want     int
	}{
		{name: "at once", hz: []int{60, 20, 20, 20}, from: 1, to: 4, want: 0},
		{name: "after two", hz: []int{60, 60, 60, 20, 20}, from: 1, to: 5, want: 2},
		{name: "relapse", hz: []int{20, 60, 20, 20}, from: 0, to: 4, want: 2},
		{name: "never", hz: []int{20, 20, 60}, from: 0, to: 3, want: -1},
		{name: "empty window", hz: []int{20}, from: 1, to: 1, want: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := settledFrom(tc.from, tc.to, func(s int) bool { return tc.hz[s] <= 30 }); got != tc.want {
				t.Fatalf("settledFrom = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestKeptTime(t *testing.T) {
	tests := []struct {
		s    ServerSample
		want bool
	}{
		{s: ServerSample{Ticks: 60, MaxLateMs: 3}, want: true},
		{s: ServerSample{Ticks: KeptMinTicks, MaxLateMs: 50}, want: true},
		{s: ServerSample{Ticks: KeptMinTicks - 1, MaxLateMs: 3}},
		{s: ServerSample{Ticks: 60, MaxLateMs: 51}},
		{s: ServerSample{Ticks: 60, MaxLateMs: 3, OverloadedTicks: 1}},
	}
	for _, tc := range tests {
		if got := tc.s.KeptTime(); got != tc.want {
			t.Errorf("%+v: KeptTime = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestMeasure checks the target figures on a synthetic run: impairment in seconds [4, 8) of 12,
// the drop class capped from 5.
func TestMeasure(t *testing.T) {
	client := func(id int, class string, hz []int, age, impairedAge int32, impairedFrom int) botswarm.ClientReport {
		c := botswarm.ClientReport{ID: id, Class: class, Local: "0.0.0.0:1000"}
		for s, v := range hz {
			sec := botswarm.Second{T: s, Hz: v, Packets: v, Full: true, Applied: 10 * v}
			a := age
			if s >= impairedFrom && s < 8 {
				a = impairedAge
			}
			for range v {
				sec.Age.Add(a)
			}
			c.Series = append(c.Series, sec)
		}
		return c
	}
	full := []int{60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 0}
	backed := []int{60, 60, 60, 60, 10, 10, 10, 10, 60, 60, 60, 0}
	r := &Result{
		ImpairFrom: 4, ImpairTo: 8, DropFrom: 5,
		Limit: map[int]int64{7: 1000},
		Swarm: &botswarm.Report{Clients: []botswarm.ClientReport{
			client(0, ClassHealthy, full, 2, 2, 4),
			client(1, ClassHealthy, []int{60, 60, 60, 60, 60, 40, 60, 60, 60, 60, 60, 0}, 2, 2, 4),
			client(2, ClassHealthy, []int{60, 60, 60, 60, 60, 40, 60, 60, 60, 60, 60, 0}, 2, 2, 4),
			client(3, ClassLossy, full, 2, 82, 4),
			client(4, ClassCapped, backed, 4, 30, 4),
			// Small frames every tick: not backed off.
			client(5, ClassCapped, []int{60, 60, 60, 60, 60, 50, 45, 50, 60, 60, 60, 0}, 4, 30, 4),
			client(6, ClassDrop, []int{60, 60, 60, 60, 60, 60, 30, 30, 60, 40, 60, 0}, 4, 54, 5),
			client(7, ClassPoliced, full, 2, 2, 4),
		}},
		Server: []ServerSample{{T: 5, Ticks: 41, MaxLateMs: 300}},
	}
	// The policed client is sent 2500, then 1800, then 1000 B a second from second 4 on (from
	// second 6, on average at most 1.25 times its policer's 1000 B/s); the policer drops 10 of
	// its 60 packets a second.
	for s, sent := range []uint64{1000, 1000, 1000, 1000, 2500, 1800, 1000, 1000} {
		var prev LinkCounts
		if s > 0 {
			prev = r.Link[s-1].Clients[0]
		}
		r.Link = append(r.Link, LinkSample{T: s, Clients: []LinkCounts{{ID: 7, BytesIn: prev.BytesIn + sent,
			PacketsIn: prev.PacketsIn + 60, DroppedPolicer: prev.DroppedPolicer + 10}}})
	}
	got := r.Measure()
	if got.Lossy.Clients != 1 || got.Lossy.AppliedPerSec != 600 || !reflect.DeepEqual(got.Lossy.SentHz, []float64{60}) {
		t.Errorf("lossy %+v, want 600 updates a second at 60 Hz", got.Lossy)
	}
	if got.Bursty.Clients != 0 || got.LossyCapped.Clients != 0 {
		t.Errorf("bursty %+v, lossy-capped %+v: classes without clients", got.Bursty, got.LossyCapped)
	}
	wantCapped := QueueFigures{
		Clients: 2, Onset: 4, SentHz: []float64{10, 47.5}, BackoffOK: false,
		BaseAgeMs: 4, AgeP95Ms: 30, SteadyAgeP95Ms: 30, QueueP95Ms: 26, SteadyQueueP95Ms: 26,
		LinkAgeP5Ms: 30, QueueP95AboveLinkMs: 0,
		LinkemQueueP95Ms: []float64{-1, -1}, // a synthetic run has no linkem stats
	}
	if !reflect.DeepEqual(got.Capped, wantCapped) {
		t.Errorf("capped\n %+v\nwant\n %+v", got.Capped, wantCapped)
	}
	// The drop's queueing is measured from its cap on (seconds 5 to 7), its send rate from 2 s
	// after (second 7).
	if d := got.Drop; d.Onset != 5 || math.Abs(d.QueueP95Ms-50) > 1 || !reflect.DeepEqual(d.SentHz, []float64{30}) || !d.BackoffOK {
		t.Errorf("drop %+v, want queueing from second 5, 50 ms above base, 30 Hz", d)
	}
	p := got.Policed
	if p.Clients != 1 || !reflect.DeepEqual(p.BackoffSec, []int{2}) || !p.BackoffOK || !reflect.DeepEqual(p.SentShare, []float64{1}) ||
		math.Abs(p.DroppedPct[0]-100.0/6) > 1e-9 {
		t.Errorf("policed %+v, want backed off in the third second, sent the policer's rate after, a sixth dropped", p)
	}
	if !got.RecoveryOK || !reflect.DeepEqual(got.RecoverySec[ClassDrop], []int{2}) || !reflect.DeepEqual(got.RecoverySec[ClassCapped], []int{0, 0}) {
		t.Errorf("recovery %v (ok %v), want the drop client back 2 s after the end, the others at once", got.RecoverySec, got.RecoveryOK)
	}
	wantHealthy := HealthyFigures{MinMedianHz: 40, Below: []HealthySecond{{T: 5, MedianHz: 40, ServerTicks: 41}}}
	if !reflect.DeepEqual(got.Healthy, wantHealthy) {
		t.Errorf("healthy %+v, want %+v", got.Healthy, wantHealthy)
	}
}
