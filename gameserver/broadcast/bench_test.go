package broadcast

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/enet"
)

// hostTotals reads the host's traffic totals on the tick loop.
func (b *Broadcaster) hostTotals(tb testing.TB) enet.Totals {
	var t enet.Totals
	inLoop(tb, b, func() { t = b.host.Totals() })
	return t
}

// manual drives a broadcaster's tick by hand on the calling goroutine, with its bots serviced in
// between: the same work Run does per tick, without the wait.
type manual struct {
	b    *Broadcaster
	bots swarm
}

func newManual(tb testing.TB, opts Options, peers int) *manual {
	tb.Helper()
	opts.Address = loopback
	b, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.shutdown(time.Now()) })
	m := &manual{b: b}
	for i := range peers {
		m.bots = append(m.bots, newBot(tb, b.Address(), uint32(i+1)))
	}
	deadline := time.Now().Add(testDeadline)
	for !m.bots.allUp() || b.live != peers {
		if time.Now().After(deadline) {
			tb.Fatal("bots did not connect")
		}
		m.step(tb)
	}
	return m
}

// seeded is the world of a manual run, which always has the same seed.
func seeded(w demo.Config) demo.Config {
	w.Seed = 11
	return w
}

// step runs one tick: the bots send, the server receives for a moment, ticks and flushes.
func (m *manual) step(tb testing.TB) {
	m.bots.service(tb)
	if err := m.b.serviceUntil(time.Now().Add(2 * time.Millisecond)); err != nil {
		tb.Fatal(err)
	}
	m.b.tick(time.Now())
}

// traffic sums the snapshot packets sent and the messages received by every session.
func (m *manual) traffic() (sent, received uint64) {
	for _, s := range m.b.sessions {
		if s.Active() {
			c := s.Counters()
			sent += c.PacketsSent
			received += c.MessagesReceived
		}
	}
	return sent, received
}

// TestTickAllocatesNothing: once warm, a whole tick with connected peers — receiving their ACKs
// and PINGs, stepping the world, building and sending every frame through ENet — allocates
// nothing.
func TestTickAllocatesNothing(t *testing.T) {
	m := newManual(t, playing(t, seeded(smallWorld(300)), false, Options{InterestRadius: 200}), 8)
	for range 600 {
		m.step(t)
	}
	sent0, recv0 := m.traffic()
	allocs := testing.AllocsPerRun(200, func() { m.step(t) })
	sent1, recv1 := m.traffic()
	if sent1 == sent0 || recv1 == recv0 {
		t.Fatalf("measured ticks sent %d packets and received %d messages: not a busy tick", sent1-sent0, recv1-recv0)
	}
	if allocs != 0 {
		t.Errorf("a warm tick allocates %.1f times", allocs)
	}
}

// udpIPHeaderBytes is what UDP and IPv4 add to every datagram ENet sends.
const udpIPHeaderBytes = 28

// BenchmarkIdleServer128 connects 128 real ENet clients to a server on a frozen world, lets them
// converge, and measures what the server sends over 10 s: ENet's bytes (its headers included)
// plus 28 bytes of UDP/IP header per datagram. Run it with -benchtime=1x.
func BenchmarkIdleServer128(b *testing.B) {
	const peers = 128
	const window = 10 * time.Second
	// Every bot connects from 127.0.0.1: the per-host connect limit must let them all in at once.
	nc := netcode.NetcodeConfig{Ingress: netcode.IngressConfig{ConnectsPerSecondPerHost: 1000, ConnectBurstPerHost: peers}}
	srv := startServer(b, playing(b, demo.Config{Population: 1000}, true, Options{InterestRadius: 250, MaxPeers: peers, Netcode: netcode.MustResolve(nc)}))
	var bots swarm
	for i := range peers {
		bots = append(bots, newBot(b, srv.Address(), uint32(i+1)))
	}
	bots.until(b, "all connected", bots.allUp)
	bots.until(b, "views converged", func() bool { return mismatches(b, srv, bots) == 0 })
	bots.runFor(b, time.Second)
	for b.Loop() {
		var t0, t1 = srv.hostTotals(b), time.Now()
		bots.runFor(b, window)
		t2 := srv.hostTotals(b)
		secs := time.Since(t1).Seconds()
		wire := float64(t2.SentBytes-t0.SentBytes) + udpIPHeaderBytes*float64(t2.SentPackets-t0.SentPackets)
		b.ReportMetric(wire/secs, "B/s")
		b.ReportMetric(wire/secs/peers, "B/s/peer")
		b.ReportMetric(float64(t2.SentPackets-t0.SentPackets)/secs, "datagrams/s")
	}
}

// tickRecorder collects tick samples from Options.OnTick while it is on.
type tickRecorder struct {
	mu      sync.Mutex
	on      bool
	samples []tickSample
}

func newTickRecorder() *tickRecorder { return &tickRecorder{samples: make([]tickSample, 0, 1<<16)} }

func (r *tickRecorder) observe(ts TickStats) {
	r.mu.Lock()
	if r.on && len(r.samples) < cap(r.samples) {
		r.samples = append(r.samples, tickSample{late: ts.Late, work: ts.Work, cpu: ts.CPU, service: ts.ServiceCPU})
	}
	r.mu.Unlock()
}

func (r *tickRecorder) start() {
	r.mu.Lock()
	r.on, r.samples = true, r.samples[:0]
	r.mu.Unlock()
}

// stopSamples ends the recording and returns a copy of its samples.
func (r *tickRecorder) stopSamples() []tickSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return slices.Clone(r.samples)
}

// churner opens and drops connections from 127.0.0.2 at a fixed rate: a CONNECT every
// 1/perSecond, each peer reset after a while if the server never answered (the connect limiter
// drops most of them), and disconnected at once if it did.
func churner(tb testing.TB, server netip.AddrPort, perSecond int, stop <-chan struct{}) (cycles int) {
	h, err := enet.NewHost(enet.Config{Address: netip.MustParseAddrPort("127.0.0.2:0"), Peers: 256, Channels: Channels})
	if err != nil {
		tb.Fatal(err)
	}
	defer h.Destroy()
	started := make([]time.Time, h.PeerCount())
	var ev enet.Event
	hello := client.New().AppendHello(nil)
	interval := time.Second / time.Duration(perSecond)
	next := time.Now()
	for {
		select {
		case <-stop:
			return cycles
		default:
		}
		now := time.Now()
		for i := range h.PeerCount() {
			if p := h.Peer(i); p.State() != enet.StateDisconnected && now.Sub(started[i]) > 50*time.Millisecond {
				p.Reset()
			}
		}
		for ; !next.After(now); next = next.Add(interval) {
			if p, err := h.Connect(server, Channels, 0); err == nil {
				started[p.Slot()] = now
				cycles++
			}
		}
		for {
			ok, err := h.Service(&ev, 0)
			if err != nil {
				tb.Error(err)
				return cycles
			}
			if !ok {
				break
			}
			if ev.Type == enet.EventConnect {
				// The HELLO, so that the server starts a session, then the close.
				_ = ev.Peer.Send(ChannelReliable, hello, enet.Reliable)
				h.Flush()
				ev.Peer.DisconnectNow(0)
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkConnectChurn measures the tick of a server with 32 clients on a moving world, quiet
// and with 2000 connect/close cycles a second from one other host, in alternating phases so that
// load from elsewhere on the machine falls on both alike. It reports the p99 of the tick's work in
// CPU time (what the server spends) and in wall time (what a loaded machine adds), of its
// completion (lateness plus work), their churn/quiet ratios, and the share of a core the churn
// adds to the transport servicing between ticks, where its CONNECTs are handled. Run it with
// -benchtime=1x.
func BenchmarkConnectChurn(b *testing.B) {
	const peers, phase, phases = 32, 2 * time.Second, 6
	rec := newTickRecorder()
	nc := netcode.NetcodeConfig{Ingress: netcode.IngressConfig{ConnectsPerSecondPerHost: 1000, ConnectBurstPerHost: peers}}
	srv := startServer(b, playing(b, demo.Config{Population: 1000}, false, Options{MaxPeers: 64, Netcode: netcode.MustResolve(nc), OnTick: rec.observe}))
	var bots swarm
	for i := range peers {
		bots = append(bots, newBot(b, srv.Address(), uint32(i+1)))
	}
	bots.until(b, "all connected", bots.allUp)
	// Back to the default per-host limit, which the churn from 127.0.0.2 meets.
	if err := resolveAndApply(context.Background(), srv, netcode.NetcodeConfig{}); err != nil {
		b.Fatal(err)
	}
	bots.runFor(b, time.Second)
	for b.Loop() {
		var quiet, churn tickSamples
		var cycles int
		var churnTime time.Duration
		r0 := srv.connectRefusals(b)
		for i := range phases {
			if i%2 == 0 {
				rec.start()
				bots.runFor(b, phase)
				quiet.add(rec.stopSamples())
				continue
			}
			stop := make(chan struct{})
			done := make(chan int, 1)
			go func() { done <- churner(b, srv.Address(), 2000, stop) }()
			rec.start()
			t0 := time.Now()
			bots.runFor(b, phase)
			churn.add(rec.stopSamples())
			close(stop)
			cycles += <-done
			churnTime += time.Since(t0)
		}
		refused := srv.connectRefusals(b) - r0
		qc, cc := quiet.p99(tickSample.cpuWork), churn.p99(tickSample.cpuWork)
		qw, cw := quiet.p99(tickSample.wallWork), churn.p99(tickSample.wallWork)
		qd, cd := quiet.p99(tickSample.completion), churn.p99(tickSample.completion)
		qs, cs := quiet.serviceShare(netcode.DefaultTickRateHz), churn.serviceShare(netcode.DefaultTickRateHz)
		b.ReportMetric(float64(qc.Microseconds()), "quiet-tick-cpu-p99-µs")
		b.ReportMetric(float64(cc.Microseconds()), "churn-tick-cpu-p99-µs")
		b.ReportMetric(float64(cc)/float64(qc), "tick-cpu-p99-ratio")
		b.ReportMetric(float64(cw)/float64(qw), "tick-wall-p99-ratio")
		b.ReportMetric(float64(cd)/float64(qd), "completion-p99-ratio")
		b.ReportMetric(float64(cs-qs)/float64(time.Second)*100, "churn-service-cpu-%")
		b.ReportMetric(float64(cycles)/churnTime.Seconds(), "cycles/s")
		b.ReportMetric(float64(refused)/churnTime.Seconds(), "refused/s")
		b.Logf("quiet: %d ticks, tick CPU p99 %v, wall p99 %v, completion p99 %v, service CPU %v/s; "+
			"churn: %d ticks, tick CPU p99 %v, wall p99 %v, completion p99 %v, service CPU %v/s; %d cycles, %d refused",
			len(quiet), qc, qw, qd, qs, len(churn), cc, cw, cd, cs, cycles, refused)
	}
	for _, bt := range bots {
		if bt.down {
			b.Errorf("client %d was disconnected (%d)", bt.data, bt.code)
		}
	}
}

// tickSample is one tick's lateness and work in wall time, and the CPU time of its work and of the
// transport servicing before it.
type tickSample struct{ late, work, cpu, service time.Duration }

func (s tickSample) wallWork() time.Duration { return s.work }
func (s tickSample) cpuWork() time.Duration  { return s.cpu }

// completion is how long after its deadline the tick finished.
func (s tickSample) completion() time.Duration { return max(s.late, 0) + s.work }

type tickSamples []tickSample

func (t *tickSamples) add(s []tickSample) { *t = append(*t, s...) }

// serviceShare is the CPU time spent servicing the transport per second of ticks.
func (t tickSamples) serviceShare(tickRateHz int) time.Duration {
	var sum time.Duration
	for _, s := range t {
		sum += s.service
	}
	return sum * time.Duration(tickRateHz) / time.Duration(max(len(t), 1))
}

func (t tickSamples) p99(of func(tickSample) time.Duration) time.Duration {
	if len(t) == 0 {
		return 0
	}
	v := make([]time.Duration, len(t))
	for i, s := range t {
		v[i] = of(s)
	}
	slices.Sort(v)
	return v[len(v)*99/100]
}

// BenchmarkStalledSessions runs 256 clients on a moving world in alternating phases: all healthy,
// then 10% of them stalled — they keep pinging but apply and acknowledge nothing, so the server
// lag-skips them and probes now and then (the stall close is set beyond the run). It reports the
// tick's p99 (CPU and wall time) and the healthy sessions' send rate in both, each the median over
// three phases, and their ratios. Run it with -benchtime=1x.
func BenchmarkStalledSessions(b *testing.B) {
	const peers, stalled, phase, phases = 256, 26, 3 * time.Second, 6
	// The 256 client hosts are serviced every 4 ms, so the swarm's own CPU time leaves the server
	// room on a small machine; acknowledgements come that much later.
	const serviceEvery = 4 * time.Millisecond
	rec := newTickRecorder()
	nc := netcode.NetcodeConfig{
		Ingress:      netcode.IngressConfig{ConnectsPerSecondPerHost: 1000, ConnectBurstPerHost: peers},
		Backpressure: netcode.BackpressureConfig{CloseStalledAfterMs: 600000},
	}
	srv := startServer(b, playing(b, demo.Config{Population: 1000}, false, Options{MaxPeers: peers, Netcode: netcode.MustResolve(nc), OnTick: rec.observe}))
	var bots swarm
	for i := range peers {
		bots = append(bots, newBot(b, srv.Address(), uint32(i+1)))
	}
	bots.until(b, "all connected", bots.allUp)
	bots.runEvery(b, 2*time.Second, serviceEvery)
	healthy := map[uint32]bool{}
	for _, bt := range bots[stalled:] {
		healthy[bt.data] = true
	}
	for b.Loop() {
		var p99s, walls [2][]time.Duration
		var rates [2][]float64
		for i := range phases {
			stall := i%2 == 1
			for _, bt := range bots[:stalled] {
				bt.deaf = stall
			}
			bots.runEvery(b, time.Second, serviceEvery) // the transition settles
			sent0 := srv.healthyFramesSent(b, healthy)
			t0 := time.Now()
			rec.start()
			bots.runEvery(b, phase, serviceEvery)
			samples := rec.stopSamples()
			sent := srv.healthyFramesSent(b, healthy) - sent0
			k := map[bool]int{false: 0, true: 1}[stall]
			p99s[k] = append(p99s[k], tickSamples(samples).p99(tickSample.cpuWork))
			walls[k] = append(walls[k], tickSamples(samples).p99(tickSample.wallWork))
			rates[k] = append(rates[k], float64(sent)/float64(len(healthy))/time.Since(t0).Seconds())
		}
		hp, sp := median(p99s[0]), median(p99s[1])
		hw, sw := median(walls[0]), median(walls[1])
		hr, sr := median(rates[0]), median(rates[1])
		b.ReportMetric(float64(hp.Microseconds()), "healthy-tick-cpu-p99-µs")
		b.ReportMetric(float64(sp.Microseconds()), "stalled-tick-cpu-p99-µs")
		b.ReportMetric(float64(sp)/float64(hp), "tick-cpu-p99-ratio")
		b.ReportMetric(float64(sw)/float64(hw), "tick-wall-p99-ratio")
		b.ReportMetric(hr, "healthy-Hz")
		b.ReportMetric(sr, "stalled-run-Hz")
		b.ReportMetric(sr/hr, "rate-ratio")
		b.Logf("all healthy: tick CPU p99s %v (wall %v), healthy send rates %.1f Hz; 10%% stalled: tick CPU p99s %v (wall %v), healthy send rates %.1f Hz",
			p99s[0], walls[0], rates[0], p99s[1], walls[1], rates[1])
	}
}

// median is the middle value of v (the upper one of an even count): one phase disturbed by load
// from elsewhere on the machine does not move it.
func median[T cmp.Ordered](v []T) T {
	w := slices.Clone(v)
	slices.Sort(w)
	return w[len(w)/2]
}

// healthyFramesSent sums the frames sent to the sessions of the healthy bots.
func (b *Broadcaster) healthyFramesSent(tb testing.TB, healthy map[uint32]bool) uint64 {
	var n uint64
	inLoop(tb, b, func() {
		for slot, s := range b.sessions {
			if s.Active() && healthy[b.connData[slot]] {
				n += s.Counters().FramesSent
			}
		}
	})
	return n
}

func (b *Broadcaster) connectRefusals(tb testing.TB) uint64 {
	var n uint64
	inLoop(tb, b, func() { n = b.host.ConnectRefusals() })
	return n
}

// BenchmarkTick measures one warm tick of a server with connected peers on a moving world: the
// world step, every session's frame build and pacing, ENet's sends and the flush; the peers'
// ACKs and PINGs are received between ticks, outside the measurement. It reports allocations,
// which must be zero.
func BenchmarkTick(b *testing.B) {
	for _, peers := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			nc := netcode.NetcodeConfig{Ingress: netcode.IngressConfig{ConnectsPerSecondPerHost: 1000, ConnectBurstPerHost: int32(peers)}}
			m := newManual(b, playing(b, seeded(demo.Config{Population: 1000}), false, Options{MaxPeers: peers, Netcode: netcode.MustResolve(nc)}), peers)
			for range 300 {
				m.step(b)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				m.bots.service(b)
				if err := m.b.serviceUntil(time.Now().Add(time.Millisecond)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				m.b.tick(time.Now())
			}
		})
	}
}
