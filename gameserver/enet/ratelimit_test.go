package enet

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestConnectRateLimitPerSource(t *testing.T) {
	const (
		burst    = 3
		flooding = 10
	)
	// A rate of one per 100 s cannot refill a token within the test, so the
	// burst is exactly what the flooding source gets.
	server := newTestHost(t, Config{Address: loopback, Peers: 32, Channels: 2,
		ConnectRate: ConnectRate{PerSecond: 0.01, Burst: burst}})
	flooder := newTestHost(t, Config{Address: loopback, Peers: flooding, Channels: 2})
	other := newTestHost(t, Config{Address: netip.MustParseAddrPort("127.0.0.2:0"), Peers: 1, Channels: 2})

	var floods []Peer
	for range flooding {
		p, err := flooder.Connect(server.Address(), 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Refused peers keep retrying; keep them from timing out meanwhile.
		p.SetTimeout(1<<20, time.Minute, time.Minute)
		floods = append(floods, p)
	}
	otherPeer, err := other.Connect(server.Address(), 2, 0)
	if err != nil {
		t.Fatal(err)
	}

	serverConnects, floodConnects, otherUp := 0, 0, false
	l := loop{hosts: []*Host{server, flooder, other}, onEvent: func(h *Host, ev *Event) {
		if ev.Type != EventConnect {
			return
		}
		switch h {
		case server:
			serverConnects++
		case flooder:
			floodConnects++
		case other:
			otherUp = ev.Peer == otherPeer
		}
	}}
	l.until(t, "burst admitted, the rest refused, the other source admitted", func() bool {
		return floodConnects == burst && otherUp && serverConnects == burst+1 &&
			server.ConnectRefusals() >= flooding-burst
	})

	// Refused CONNECTs never reached ENet: only admitted ones hold a slot.
	used := 0
	for slot := range server.PeerCount() {
		if server.Peer(slot).State() != StateDisconnected {
			used++
		}
	}
	if used != burst+1 {
		t.Errorf("server holds %d peer slots, want %d", used, burst+1)
	}
	pending := 0
	for _, p := range floods {
		if p.State() == StateConnecting {
			pending++
		}
	}
	if pending != flooding-burst {
		t.Errorf("%d flooding peers still connecting, want %d", pending, flooding-burst)
	}
	if got := server.MalformedDatagrams(); got != 0 {
		t.Errorf("%d malformed datagrams counted from well-formed traffic", got)
	}

	// Lifting the limit live lets the retries through.
	if err := server.SetConnectRate(0, 0); err != nil {
		t.Fatal(err)
	}
	refused := server.ConnectRefusals()
	l.until(t, "retries admitted after lifting the limit", func() bool { return floodConnects == flooding })
	if got := server.ConnectRefusals(); got != refused {
		t.Errorf("refusals rose from %d to %d with the limiter off", refused, got)
	}
	if err := server.SetConnectRate(1, 0); err == nil {
		t.Error("SetConnectRate accepted a rate without a burst")
	}
}

// rawSender sends hand-made datagrams to a host and waits until the host has
// taken each one in.
type rawSender struct {
	tb   testing.TB
	conn *net.UDPConn
	host *Host
	ev   Event
}

func newRawSender(tb testing.TB, h *Host) *rawSender {
	tb.Helper()
	conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(h.Address()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return &rawSender{tb: tb, conn: conn, host: h}
}

// send delivers one non-empty datagram and services the host until it was
// either counted as received by ENet or dropped as malformed.
func (s *rawSender) send(datagram []byte) {
	s.tb.Helper()
	received, malformed := s.host.Totals().ReceivedPackets, s.host.MalformedDatagrams()
	if _, err := s.conn.Write(datagram); err != nil {
		s.tb.Fatal(err)
	}
	deadline := time.Now().Add(testDeadline)
	for s.host.Totals().ReceivedPackets == received && s.host.MalformedDatagrams() == malformed {
		if time.Now().After(deadline) {
			s.tb.Fatalf("datagram of %d bytes not taken in within %s", len(datagram), testDeadline)
		}
		if _, err := s.host.Service(&s.ev, time.Millisecond); err != nil {
			s.tb.Fatalf("service after a %d-byte datagram: %v", len(datagram), err)
		}
	}
	s.ev.Packet.Destroy()
}

// connectDatagram is a CONNECT as a new client sends it: peer ID 0xFFF with
// the sent-time flag, then the command.
func connectDatagram() []byte {
	d := make([]byte, 4+48)
	d[0], d[1] = 0x8f, 0xff // sent-time flag | peer ID 0xFFF
	d[4] = 0x82             // CONNECT | acknowledge flag
	d[5] = 0xff
	return d
}

func TestInterceptClassifiesDatagrams(t *testing.T) {
	truncatedConnect := connectDatagram()[:7]
	noSentTimeConnect := append([]byte{0x0f, 0xff}, connectDatagram()[4:]...)
	tests := []struct {
		name               string
		datagram           []byte
		malformed, refused uint64
	}{
		{"one byte", []byte{0x0f}, 1, 0},
		{"sent-time flag without the time", []byte{0x8f, 0xff, 0x00}, 1, 0},
		{"compressed", []byte{0x4f, 0xff, 0x82, 0x00, 0x01}, 1, 0},
		{"larger than ENet's buffer", bytes.Repeat([]byte{0x0f}, 5000), 1, 0},
		{"header only", []byte{0x0f, 0xff}, 0, 0},
		{"sent-time header only", []byte{0x8f, 0xff, 0x12, 0x34}, 0, 0},
		{"unknown command", []byte{0x0f, 0xff, 0x0e}, 0, 0},
		{"ping to no peer", []byte{0x00, 0x01, 0x05, 0x00, 0x00, 0x00}, 0, 0},
		// The source has a burst of 2: two CONNECTs pass, then one per 100 s.
		{"connect", connectDatagram(), 0, 0},
		{"truncated connect", truncatedConnect, 0, 0},
		{"connect over the rate", connectDatagram(), 0, 1},
		{"connect without sent time over the rate", noSentTimeConnect, 0, 1},
		{"ping over the rate", []byte{0x0f, 0xff, 0x05, 0x00, 0x00, 0x00}, 0, 0},
	}
	server := newTestHost(t, Config{Address: loopback, Peers: 4, Channels: 2,
		ConnectRate: ConnectRate{PerSecond: 0.01, Burst: 2}})
	sender := newRawSender(t, server)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			malformed, refused := server.MalformedDatagrams(), server.ConnectRefusals()
			sender.send(tt.datagram)
			if got := server.MalformedDatagrams() - malformed; got != tt.malformed {
				t.Errorf("malformed count rose by %d, want %d", got, tt.malformed)
			}
			if got := server.ConnectRefusals() - refused; got != tt.refused {
				t.Errorf("refusal count rose by %d, want %d", got, tt.refused)
			}
		})
	}
}

// FuzzInterceptDatagram sends arbitrary datagrams at a rate-limited host: the
// intercept must never crash, Service must never fail, and the counters only
// ever grow.
func FuzzInterceptDatagram(f *testing.F) {
	for _, seed := range [][]byte{
		{0x0f}, {0x8f, 0xff, 0x00}, {0x4f, 0xff, 0x82}, {0x0f, 0xff},
		connectDatagram(), connectDatagram()[:7], {0x00, 0x00, 0x06, 0x00, 0x00, 0x01, 0x00, 0x01, 0x61},
	} {
		f.Add(seed)
	}
	server := newTestHost(f, Config{Address: loopback, Peers: 8, Channels: 2,
		ConnectRate: ConnectRate{PerSecond: 50, Burst: 5}})
	sender := newRawSender(f, server)
	f.Fuzz(func(t *testing.T, datagram []byte) {
		// A zero-length datagram reads as "nothing pending" to ENet, so it
		// cannot be waited for; the largest UDP payload bounds the rest.
		if len(datagram) == 0 || len(datagram) > 65507 {
			return
		}
		sender.tb = t
		malformed, refused := server.MalformedDatagrams(), server.ConnectRefusals()
		sender.send(datagram)
		if server.MalformedDatagrams() < malformed || server.ConnectRefusals() < refused {
			t.Fatal("a counter went backwards")
		}
	})
}

func TestConnectRateTableIsBoundedAndEvictsOldest(t *testing.T) {
	// Sources are spread over 512 sets of 8 by a keyed hash; 16384 new sources
	// put about 32 in each set, so the first source's entry is evicted unless
	// fewer than 8 of them land in its set (a chance near 1e-7).
	const sources = 16384
	server := newTestHost(t, Config{Address: loopback, Peers: 4, Channels: 2,
		ConnectRate: ConnectRate{PerSecond: 0.01, Burst: 1}})
	first := newRawSender(t, server)
	// A CONNECT cut short after its command byte costs a token but never a
	// peer, so the flood cannot fill the server's slots.
	cut := connectDatagram()[:7]

	first.send(cut)
	first.send(cut)
	if got := server.ConnectRefusals(); got != 1 {
		t.Fatalf("after two CONNECTs with a burst of 1: %d refusals, want 1", got)
	}
	heap := CHeapBytes()

	dst := net.UDPAddrFromAddrPort(server.Address())
	var ev Event
	for i := range sources {
		src := &net.UDPAddr{IP: net.IPv4(127, 1, byte(i>>8), byte(i))}
		conn, err := net.ListenUDP("udp4", src)
		if err != nil {
			t.Fatal(err)
		}
		// Loopback delivers during the write, so closing at once loses nothing.
		_, err = conn.WriteToUDP(cut, dst)
		_ = conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Drain often enough that the server's socket buffer never overflows.
		if i%128 == 127 {
			if _, err := server.Service(&ev, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(testDeadline)
	for server.Totals().ReceivedPackets < sources+2 {
		if time.Now().After(deadline) {
			t.Fatalf("server took in %d of %d datagrams", server.Totals().ReceivedPackets, sources+2)
		}
		if _, err := server.Service(&ev, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if got := server.ConnectRefusals(); got != 1 {
		t.Errorf("each new source has a full bucket, yet refusals rose to %d", got)
	}
	if grown := int64(CHeapBytes()) - int64(heap); grown > 16<<10 {
		t.Errorf("C heap grew %d bytes while tracking %d sources", grown, sources)
	}

	// The first source was evicted, so it starts again with a full bucket.
	first.send(cut)
	if got := server.ConnectRefusals(); got != 1 {
		t.Errorf("evicted source refused on return (%d refusals)", got)
	}
	first.send(cut)
	if got := server.ConnectRefusals(); got != 2 {
		t.Errorf("returning source's second CONNECT: %d refusals, want 2", got)
	}
}
