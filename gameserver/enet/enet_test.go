package enet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// testDeadline bounds every wait on the network; generous for a loaded
// 2-core machine, it is a hang guard, not a speed assertion.
const testDeadline = 20 * time.Second

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

func newTestHost(tb testing.TB, cfg Config) *Host {
	tb.Helper()
	h, err := NewHost(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Destroy)
	return h
}

func newServer(tb testing.TB) *Host {
	tb.Helper()
	return newTestHost(tb, Config{Address: loopback, Peers: 16, Channels: 4})
}

func newClient(tb testing.TB, peers int) *Host {
	tb.Helper()
	return newTestHost(tb, Config{Peers: peers, Channels: 4})
}

// loop services a set of hosts from one goroutine.
type loop struct {
	hosts   []*Host
	onEvent func(h *Host, ev *Event) // may be nil
	onRound func()                   // may be nil; runs once per round
}

// until services every host in turn, handing each event to onEvent, until
// cond holds; it fails the test at the deadline. Packets are destroyed by the
// next Service on the shared Event, so onEvent copies what it keeps.
func (l loop) until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(testDeadline)
	var ev Event
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not reached within %s", what, testDeadline)
		}
		if l.onRound != nil {
			l.onRound()
		}
		for _, h := range l.hosts {
			ok, err := h.Service(&ev, time.Millisecond)
			for ; ok && err == nil; ok, err = h.Service(&ev, 0) {
				if l.onEvent != nil {
					l.onEvent(h, &ev)
				}
			}
			if err != nil {
				tb.Fatalf("%s: %v", what, err)
			}
		}
	}
	ev.Packet.Destroy()
}

// connect connects client to server and returns both ends once both sides
// reported EventConnect.
func connect(tb testing.TB, server, client *Host, data uint32) (serverEnd, clientEnd Peer) {
	tb.Helper()
	clientEnd, err := client.Connect(server.Address(), 4, data)
	if err != nil {
		tb.Fatal(err)
	}
	var clientUp bool
	l := loop{hosts: []*Host{server, client}, onEvent: func(h *Host, ev *Event) {
		switch {
		case ev.Type != EventConnect:
		case h == server && ev.Data == data:
			serverEnd = ev.Peer
		case h == client && ev.Peer == clientEnd:
			clientUp = true
		}
	}}
	l.until(tb, "connect", func() bool { return clientUp && !serverEnd.IsZero() })
	return serverEnd, clientEnd
}

// message is a test payload: a header naming sender, channel and sequence,
// then bytes derived from the header, so a receiver can check integrity.
type msgID struct {
	from, channel uint8
	seq           uint16
}

func makeMessage(id msgID, size int) []byte {
	b := make([]byte, 4+size)
	b[0], b[1] = id.from, id.channel
	binary.LittleEndian.PutUint16(b[2:], id.seq)
	for i := range size {
		b[4+i] = byte(int(id.from)*31 + int(id.channel)*7 + int(id.seq) + i)
	}
	return b
}

func parseMessage(b []byte) (msgID, bool) {
	if len(b) < 4 {
		return msgID{}, false
	}
	id := msgID{from: b[0], channel: b[1], seq: binary.LittleEndian.Uint16(b[2:])}
	return id, bytes.Equal(b, makeMessage(id, len(b)-4))
}

func TestExchangeAcrossChannels(t *testing.T) {
	const (
		clients = 3
		perChan = 12
		unrelia = 2 // channels 2 and 3 are not reliable
	)
	channelFlags := [4]PacketFlags{Reliable, Reliable, Unreliable, Unsequenced}
	// Sizes cover an empty body, a typical snapshot and a reliable packet that
	// ENet must fragment (over the 1400-byte MTU).
	sizeOf := func(ch uint8, seq uint16) int {
		if channelFlags[ch] == Reliable && seq == 0 {
			return 3000
		}
		return int(seq) * 97 % 1200
	}

	server := newServer(t)
	type end struct {
		host       *Host
		toServer   Peer
		fromServer Peer
	}
	ends := make([]end, clients)
	for i := range ends {
		c := newClient(t, 1)
		s, p := connect(t, server, c, uint32(100+i))
		ends[i] = end{host: c, toServer: p, fromServer: s}
	}

	// Each side keeps unreceived unreliable messages and resends them until
	// they arrive, so ENet's throttle cannot make the test flaky.
	type key struct {
		to int // client index, or -1 for the server
		id msgID
	}
	outstanding := map[key]func() error{}
	got := map[key]int{}
	send := func(k key, p Peer, ch uint8, m []byte) {
		if err := p.Send(ch, m, channelFlags[ch]); err != nil {
			t.Fatalf("send %+v: %v", k, err)
		}
		if channelFlags[ch] != Reliable {
			outstanding[k] = func() error { return p.Send(ch, m, channelFlags[ch]) }
		}
	}
	for i, e := range ends {
		for ch := range uint8(4) {
			for seq := range uint16(perChan) {
				up := msgID{from: uint8(i), channel: ch, seq: seq}
				send(key{to: -1, id: up}, e.toServer, ch, makeMessage(up, sizeOf(ch, seq)))
				down := msgID{from: 200, channel: ch, seq: seq}
				send(key{to: i, id: down}, e.fromServer, ch, makeMessage(down, sizeOf(ch, seq)))
			}
		}
	}

	lastResend := time.Now()
	hosts := []*Host{server}
	for _, e := range ends {
		hosts = append(hosts, e.host)
	}
	l := loop{
		hosts: hosts,
		onEvent: func(h *Host, ev *Event) {
			if ev.Type != EventReceive {
				t.Fatalf("unexpected %s event", ev.Type)
			}
			id, ok := parseMessage(ev.Packet.Bytes())
			if !ok || id.channel != ev.Channel {
				t.Fatalf("corrupt packet on channel %d: %d bytes", ev.Channel, ev.Packet.Len())
			}
			to := -1
			for i, e := range ends {
				if e.host == h {
					to = i
				}
			}
			if to == -1 && ev.Peer != ends[id.from].fromServer {
				t.Fatalf("message from client %d arrived from peer slot %d", id.from, ev.Peer.Slot())
			}
			k := key{to: to, id: id}
			got[k]++
			delete(outstanding, k)
		},
		onRound: func() {
			if time.Since(lastResend) < 50*time.Millisecond {
				return
			}
			lastResend = time.Now()
			for k, resend := range outstanding {
				if err := resend(); err != nil {
					t.Fatalf("resend %+v: %v", k, err)
				}
			}
		},
	}
	want := 2 * clients * 4 * perChan
	l.until(t, "all messages delivered", func() bool { return len(got) == want })

	for k, n := range got {
		if channelFlags[k.id.channel] == Reliable && n != 1 {
			t.Errorf("reliable message %+v delivered %d times", k, n)
		}
	}
	if tot := server.Totals(); tot.ReceivedBytes == 0 || tot.SentBytes == 0 || tot.ReceivedPackets == 0 || tot.SentPackets == 0 {
		t.Errorf("server totals did not move: %+v", tot)
	}
}

func TestDisconnectCarriesData(t *testing.T) {
	tests := []struct {
		name      string
		byServer  bool
		how       func(Peer, uint32)
		code      uint32
		localSees bool // the initiating side gets its own EventDisconnect
	}{
		{"client disconnects", false, Peer.Disconnect, 4001, true},
		{"server disconnects", true, Peer.Disconnect, 1013, true},
		{"server disconnects later", true, Peer.DisconnectLater, 1008, true},
		{"server disconnects now", true, Peer.DisconnectNow, 1008, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, client := newServer(t), newClient(t, 1)
			serverEnd, clientEnd := connect(t, server, client, 7)
			local, remote, localEnd, remoteEnd := client, server, clientEnd, serverEnd
			if tt.byServer {
				local, remote, localEnd, remoteEnd = server, client, serverEnd, clientEnd
			}
			slot := remoteEnd.Slot()

			tt.how(localEnd, tt.code)
			if !tt.localSees && localEnd.State() != StateDisconnected {
				t.Fatalf("after DisconnectNow the local slot is %s", localEnd.State())
			}
			var remoteData uint32
			remoteDone, localDone := false, !tt.localSees
			l := loop{hosts: []*Host{server, client}, onEvent: func(h *Host, ev *Event) {
				if ev.Type != EventDisconnect {
					return
				}
				switch h {
				case remote:
					if ev.Peer.Slot() != slot {
						t.Errorf("disconnect for slot %d, want %d", ev.Peer.Slot(), slot)
					}
					remoteData, remoteDone = ev.Data, true
				case local:
					if !tt.localSees {
						t.Error("DisconnectNow produced a local disconnect event")
					}
					localDone = true
				}
			}}
			l.until(t, "disconnect events", func() bool { return remoteDone && localDone })
			if remoteData != tt.code {
				t.Errorf("remote saw disconnect data %d, want %d", remoteData, tt.code)
			}
			if got := remoteEnd.State(); got != StateDisconnected {
				t.Errorf("remote slot state %s after the event, want disconnected", got)
			}
		})
	}
}

func TestLinkStatsMove(t *testing.T) {
	server, client := newServer(t), newClient(t, 1)
	clientEnd, err := client.Connect(server.Address(), 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Before any acknowledgement ENet holds its 500 ms default RTT.
	initial := clientEnd.LinkStats()
	if initial.RTT != 500*time.Millisecond || initial.PacketThrottle != 32 || initial.ThrottleRatio != 1 {
		t.Fatalf("stats before the handshake: %+v", initial)
	}
	var serverEnd Peer
	up := false
	l := loop{hosts: []*Host{server, client}, onEvent: func(h *Host, ev *Event) {
		switch {
		case ev.Type != EventConnect:
		case h == server:
			serverEnd = ev.Peer
		default:
			up = true
		}
	}}
	l.until(t, "connect", func() bool { return up && !serverEnd.IsZero() })
	for _, p := range []Peer{serverEnd, clientEnd} {
		p.SetPingInterval(10 * time.Millisecond)
		p.SetTimeout(0, 10*time.Second, 20*time.Second)
	}

	if got, want := clientEnd.Address(), server.Address(); got != want {
		t.Errorf("client's peer address %s, want the server's %s", got, want)
	}
	if a := serverEnd.Address(); a.Addr() != loopback.Addr() || a.Port() == 0 {
		t.Errorf("server's peer address %s, want 127.0.0.1 with a port", a)
	}
	if serverEnd.State() != StateConnected || server.ConnectedPeers() != 1 {
		t.Errorf("server end %s with %d connected peers", serverEnd.State(), server.ConnectedPeers())
	}
	if server.PeerCount() != 16 || server.Peer(serverEnd.Slot()) != serverEnd || !server.Peer(16).IsZero() || !server.Peer(-1).IsZero() {
		t.Errorf("slot lookup: %d slots, slot %d is %v", server.PeerCount(), serverEnd.Slot(), server.Peer(serverEnd.Slot()))
	}

	// Two reliable packets flushed in one datagram: until the server
	// acknowledges, both are in transit; once it delivers the first, the
	// second waits in ENet.
	first, second := make([]byte, 300), make([]byte, 200)
	for _, b := range [][]byte{first, second} {
		if err := clientEnd.Send(0, b, Reliable); err != nil {
			t.Fatal(err)
		}
	}
	client.Flush()
	if got := clientEnd.LinkStats().ReliableDataInTransit; got != 500 {
		t.Errorf("reliable data in transit after the flush: %d bytes, want 500", got)
	}
	var ev Event
	receive(t, server, &ev)
	if ev.Packet.Len() != len(first) {
		t.Fatalf("first packet has %d bytes", ev.Packet.Len())
	}
	if got := serverEnd.LinkStats().TotalWaitingData; got != uint64(len(second)) {
		t.Errorf("waiting data with one packet undelivered: %d bytes, want %d", got, len(second))
	}
	// The second packet is already queued: CheckEvents hands it over without
	// touching the socket, and then has nothing more.
	if ok, err := server.CheckEvents(&ev); err != nil || !ok || ev.Type != EventReceive || ev.Packet.Len() != len(second) {
		t.Fatalf("CheckEvents: %v, %v, %s event of %d bytes", ok, err, ev.Type, ev.Packet.Len())
	}
	if ok, err := server.CheckEvents(&ev); err != nil || ok || ev.Packet.Len() != 0 {
		t.Fatalf("CheckEvents with nothing queued: %v, %v, %s event", ok, err, ev.Type)
	}

	// Pings replace the default with measured RTTs and acknowledgements empty
	// the transit.
	settled := func(s LinkStats) bool {
		return s.RTT > 0 && s.RTT != initial.RTT && s.LowestRTT > 0 &&
			s.ReliableDataInTransit == 0 && s.TotalWaitingData == 0
	}
	l.until(t, "measured link stats", func() bool {
		return settled(clientEnd.LinkStats()) && settled(serverEnd.LinkStats())
	})
	for name, p := range map[string]Peer{"server": serverEnd, "client": clientEnd} {
		s := p.LinkStats()
		if s.LowestRTT > s.RTT {
			t.Errorf("%s: lowest RTT %s above RTT %s", name, s.LowestRTT, s.RTT)
		}
		if s.PacketLoss < 0 || s.PacketLoss > 1 {
			t.Errorf("%s: packet loss %v outside 0..1", name, s.PacketLoss)
		}
		if s.PacketThrottle > 32 || s.ThrottleRatio != float64(s.PacketThrottle)/32 {
			t.Errorf("%s: throttle %d, ratio %v", name, s.PacketThrottle, s.ThrottleRatio)
		}
	}
	if (Peer{}).LinkStats() != (LinkStats{}) {
		t.Error("zero Peer has non-zero link stats")
	}
}

func TestNewHostRefusesBadConfig(t *testing.T) {
	taken := newServer(t).Address()
	tests := []struct {
		name string
		cfg  Config
		want string
		is   error
	}{
		{"no peers", Config{}, "enet: create client host: peers 0 out of range 1..4095", nil},
		{"too many peers", Config{Peers: MaxPeers + 1}, "peers 4096 out of range", nil},
		{"channels", Config{Peers: 1, Channels: 256}, "channels 256 out of range 0..255", nil},
		{"packet size", Config{Peers: 1, MaximumPacketSize: -1}, "maximum packet size -1", nil},
		{"waiting data", Config{Peers: 1, MaximumWaitingData: -1}, "maximum waiting data -1", nil},
		{"ipv6", Config{Address: netip.MustParseAddrPort("[::1]:0"), Peers: 1}, "enet: create host on [::1]:0: address [::1]:0 is not IPv4", nil},
		{"negative rate", Config{Peers: 1, ConnectRate: ConnectRate{PerSecond: -1, Burst: 1}}, "connect rate -1 per second", nil},
		{"rate without burst", Config{Peers: 1, ConnectRate: ConnectRate{PerSecond: 5}}, "connect burst 0 must be >= 1", nil},
		{"burst without rate", Config{Peers: 1, ConnectRate: ConnectRate{Burst: 5}}, "connect burst 5 needs a rate", nil},
		{"port in use", Config{Address: taken, Peers: 1}, "enet: create host on " + taken.String() + ": address already in use", syscall.EADDRINUSE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHost(tt.cfg)
			if err == nil {
				h.Destroy()
				t.Fatal("NewHost succeeded")
			}
			if !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
		})
	}
}

func TestConnectAndSendErrors(t *testing.T) {
	server := newServer(t)
	client := newTestHost(t, Config{Peers: 1, Channels: 4, MaximumPacketSize: 2048})
	if _, err := client.Connect(server.Address(), 0, 0); err == nil {
		t.Error("connect with 0 channels succeeded")
	}
	if _, err := client.Connect(netip.MustParseAddrPort("[::1]:9"), 1, 0); err == nil {
		t.Error("connect to IPv6 succeeded")
	}
	if _, err := client.Connect(netip.MustParseAddrPort("127.0.0.1:0"), 1, 0); err == nil {
		t.Error("connect to port 0 succeeded")
	}
	pending, err := client.Connect(server.Address(), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Connect(server.Address(), 2, 0); err == nil || !bytes.Contains([]byte(err.Error()), []byte("no free peer slot")) {
		t.Errorf("second connect on a 1-slot host: %v", err)
	}
	heap := CHeapBytes()
	for range 1000 {
		if err := pending.Send(0, []byte("early"), Reliable); !errors.Is(err, ErrNotConnected) {
			t.Fatalf("send before connect: %v", err)
		}
	}
	// ENet refused the packets, so the binding freed them: about 90 bytes
	// each would otherwise stay on the C heap.
	if grown := int64(CHeapBytes()) - int64(heap); grown > 16<<10 {
		t.Errorf("C heap grew %d bytes over 1000 refused sends", grown)
	}

	var up bool
	l := loop{hosts: []*Host{server, client}, onEvent: func(h *Host, ev *Event) {
		up = up || (h == client && ev.Type == EventConnect)
	}}
	l.until(t, "connect", func() bool { return up })

	tests := []struct {
		name    string
		peer    Peer
		channel uint8
		size    int
		flags   PacketFlags
		is      error
	}{
		{"zero peer", Peer{}, 0, 1, Reliable, ErrNoPeer},
		{"channel beyond the peer's", pending, 2, 1, Reliable, ErrBadChannel},
		{"too large", pending, 0, 4096, Reliable, ErrPacketTooLarge},
		{"unknown flags", pending, 0, 1, 1 << 2, ErrBadFlags},
		{"empty packet", pending, 1, 0, Unsequenced, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.peer.Send(tt.channel, make([]byte, tt.size), tt.flags)
			if !errors.Is(err, tt.is) {
				t.Errorf("Send: %v, want %v", err, tt.is)
			}
		})
	}

	client.Destroy()
	client.Destroy()
	if _, err := client.Connect(server.Address(), 1, 0); !errors.Is(err, ErrDestroyed) {
		t.Errorf("connect on destroyed host: %v", err)
	}
	var ev Event
	if _, err := client.Service(&ev, 0); !errors.Is(err, ErrDestroyed) {
		t.Errorf("service on destroyed host: %v", err)
	}
	if _, err := client.CheckEvents(&ev); !errors.Is(err, ErrDestroyed) {
		t.Errorf("check events on destroyed host: %v", err)
	}
	if err := client.SetConnectRate(1, 1); !errors.Is(err, ErrDestroyed) {
		t.Errorf("SetConnectRate on destroyed host: %v", err)
	}
}
