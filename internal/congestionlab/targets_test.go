package congestionlab

import (
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

// TestMeasureLossy: the back-off is judged on the send rate, two seconds at a time, the recovery
// on the received rate; impairment in seconds [2, 8) of 12.
func TestMeasureLossy(t *testing.T) {
	//                  0   1   2   3   4   5   6   7   8   9  10  11
	sent := []float64{60, 60, 60, 40, 20, 20, 20, 20, 60, 60, 60, 60}
	got := []float64{60, 60, 30, 20, 10, 10, 10, 10, 30, 50, 60, 60}
	m := MeasureLossy(sent, got, 2, 8, 12)
	want := LossyClient{MaxMeanHz: 20, MaxSecondHz: 20, MedianHz: 20, BackoffSec: 1, RecoverySec: 2}
	if m != want {
		t.Errorf("MeasureLossy = %+v, want %+v", m, want)
	}
	// A client still over the limit at the end of the impairment never backed off, and one
	// under the recovered rate at the end of the run never recovered.
	sent[6], got[11] = 60, 50
	if m := MeasureLossy(sent, got, 2, 8, 12); m.BackoffSec != -1 || m.RecoverySec != -1 || m.MaxMeanHz != 40 {
		t.Errorf("MeasureLossy = %+v, want back-off and recovery -1, highest mean 40 Hz", m)
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

// TestMeasure checks the target figures on a synthetic run: impairment in seconds [4, 8) of 12.
func TestMeasure(t *testing.T) {
	client := func(id int, class string, hz []int, age int32, impairedAge int32) botswarm.ClientReport {
		c := botswarm.ClientReport{ID: id, Class: class, Local: "0.0.0.0:1000"}
		for s, v := range hz {
			sec := botswarm.Second{T: s, Hz: v, Packets: v, Full: true}
			a := age
			if s >= 4 && s < 8 {
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
	r := &Result{
		ImpairFrom: 4, ImpairTo: 8,
		Swarm: &botswarm.Report{Clients: []botswarm.ClientReport{
			client(0, ClassHealthy, full, 2, 2),
			client(1, ClassHealthy, []int{60, 60, 60, 60, 60, 40, 60, 60, 60, 60, 60, 0}, 2, 2),
			client(2, ClassHealthy, []int{60, 60, 60, 60, 60, 40, 60, 60, 60, 60, 60, 0}, 2, 2),
			client(3, ClassLossy, []int{60, 60, 60, 60, 50, 20, 10, 10, 30, 60, 60, 0}, 2, 82),
			client(4, ClassLossy, []int{60, 60, 60, 60, 30, 30, 30, 10, 60, 55, 60, 0}, 2, 82),
			client(5, ClassCapped, []int{60, 60, 60, 60, 10, 10, 10, 10, 60, 60, 60, 0}, 4, 30),
			// Small frames every tick: not backed off.
			client(6, ClassCapped, []int{60, 60, 60, 60, 60, 50, 45, 50, 60, 60, 60, 0}, 4, 30),
		}},
		Server: []ServerSample{{T: 5, Ticks: 41, MaxLateMs: 300}},
	}
	got := r.Measure()
	want := Targets{
		Lossy: LossyFigures{
			MaxSentHz: 20, MaxSecondSentHz: 30, BackoffSec: []int{1, 0}, RecoverySec: []int{1, 0}, BackoffOK: true, RecoveryOK: true,
		},
		Capped: CappedFigures{
			SentHz: []float64{10, 47.5}, BackoffOK: false,
			BaseAgeMs: 4, AgeP95Ms: 30, SteadyAgeP95Ms: 30, QueueP95Ms: 26, SteadyQueueP95Ms: 26,
			LinkAgeP5Ms: 30, QueueP95AboveLinkMs: 0,
			LinkemQueueP95Ms: []float64{-1, -1}, // a synthetic run has no linkem stats
		},
		Healthy: HealthyFigures{MinMedianHz: 40, Below: []HealthySecond{{T: 5, MedianHz: 40, ServerTicks: 41}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Measure =\n %+v\nwant\n %+v", got, want)
	}
}
