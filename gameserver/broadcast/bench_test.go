package broadcast

import (
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/world"
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
	if opts.World.Seed == 0 {
		opts.World.Seed = 11
	}
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
	m := newManual(t, Options{World: smallWorld(300), InterestRadius: 200}, 8)
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
	srv := startServer(b, Options{World: world.Config{Population: 1000}, InterestRadius: 250, Frozen: true, MaxPeers: peers, Netcode: nc})
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
