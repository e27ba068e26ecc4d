package botswarm

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSwarmCPU runs 120 bots for 3 s against a 60 Hz source and reports the process CPU
// time per bot-second (without the source's own thread), the observed snapshot rates and the
// rate the source managed to send at.
func BenchmarkSwarmCPU(b *testing.B) {
	const bots = 120
	for b.Loop() {
		src := startSource(b, sourceConfig{hz: 60, packetsPerFrame: 2, records: 20})
		s, err := New(Config{Server: src.addr(), Classes: []Class{{Name: "b", Count: bots}}, Duration: 3 * time.Second, CommandsHz: 30})
		if err != nil {
			b.Fatal(err)
		}
		before := cpuTime(b)
		r, err := s.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		src.close()
		cpu := cpuTime(b) - before - src.cpu
		b.ReportMetric(float64(cpu.Microseconds())/(bots*3), "bot-cpu-µs/bot-s")
		b.ReportMetric(r.Classes[0].Summary.HzMedian, "hz-median")
		b.ReportMetric(float64(r.Classes[0].Summary.HzMin), "hz-min")
		frames := 0
		for _, p := range src.all() {
			frames += p.frames
		}
		b.ReportMetric(float64(frames)/(bots*3), "source-hz")
	}
}

func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChurn runs 2000 connect/close cycles per second from one host for 2 s against an
// open source and reports the cycles achieved per second and the attempts that did not complete.
func BenchmarkChurn(b *testing.B) {
	for b.Loop() {
		src := startSource(b, sourceConfig{peers: 4095})
		r, err := RunChurn(context.Background(), ChurnConfig{
			Server: src.addr(), Rate: 2000, Duration: 2 * time.Second,
			ConnectTimeout: 5 * time.Second, CloseTimeout: 5 * time.Second,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.CyclesPerSec, "cycles/s")
		b.ReportMetric(float64(r.Attempts-r.Cycles), "incomplete")
		b.ReportMetric(r.ConnectMsP95, "connect-p95-ms")
	}
}
