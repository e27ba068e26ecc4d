package broadcast

import (
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/internal/linkem"
)

// adversaryConfig keeps the receive-side limits small, so the test reaches them.
func adversaryConfig() netcode.NetcodeConfig {
	return netcode.NetcodeConfig{Memory: netcode.MemoryConfig{
		MaxInboundMessageBytes:       1024,
		MaxPendingBytesPerConnection: 8192,
		MaxParkedBytesPerConnection:  65536,
	}}
}

// TestAdversaries runs well-behaved clients next to a client that stops reading, one that floods
// COMMANDs, one that floods reliable COMMANDs over a lossy upstream (so the server's transport
// parks out-of-order data), one that sends malformed and oversized messages and raw garbage
// datagrams, and one that connects and disconnects in a loop. The server stays up and never
// panics; the staller is closed with 4001, the flooder with 1008, the parker with either (its
// full transport buffer also drops its PINGs); the malformed client is counted and kept; the
// churn is rate-limited; what the parker makes the server hold stays under its ceiling; the good
// clients keep being served and converge.
func TestAdversaries(t *testing.T) {
	nc := adversaryConfig()
	d := nc.Default()
	var mu sync.Mutex
	closed := map[int]uint32{} // slot -> close code
	// The tick loop samples what the parker makes the server hold after every tick, so a parker
	// closed early on a loaded machine is still seen at its peak.
	var (
		srv                    atomic.Pointer[Broadcaster]
		watched                atomic.Int64 // the parker's slot + 1; 0 until it is known
		peakWaiting, peakInbox atomic.Uint64
	)
	b := startServer(t, playing(t, smallWorld(200), false, Options{InterestRadius: 150, Netcode: netcode.MustResolve(nc), MaxPeers: 32,
		OnTick: func(TickStats) {
			bb, slot := srv.Load(), int(watched.Load())-1
			if bb == nil || slot < 0 {
				return
			}
			if s := bb.sessions[slot]; s.Active() {
				peakWaiting.Store(max(peakWaiting.Load(), bb.peers[slot].LinkStats().TotalWaitingData))
				peakInbox.Store(max(peakInbox.Load(), uint64(s.Stats().InboxBytes)))
			}
		},
		OnPeerEnd: func(e PeerEnd) {
			mu.Lock()
			closed[e.Stats.Slot] = e.Code
			mu.Unlock()
		}}))
	closedWith := func(slot int) (uint32, bool) {
		mu.Lock()
		defer mu.Unlock()
		c, ok := closed[slot]
		return c, ok
	}

	good := swarm{newBot(t, b.Address(), 1), newBot(t, b.Address(), 2), newBot(t, b.Address(), 3)}
	staller := newBot(t, b.Address(), 10)
	malformed := newBot(t, b.Address(), 11)
	proxy, err := linkem.New(linkem.Config{Listen: "127.0.0.1:0", Upstream: b.Address().String(), Seed: 1,
		Default: linkem.Profile{Up: linkem.Impairment{Loss: 0.3, Reorder: 0.3, ReorderDelayMs: 30}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	parker := newBot(t, proxy.Addr(), 12)
	flooder := newBot(t, b.Address(), 13)
	all := append(swarm{staller, malformed, parker, flooder}, good...)
	all.until(t, "all connected", all.allUp)
	// A client counts itself connected before the server's loop has handled the connect, so the
	// slots are read once the server has a session for every client: a client missing from the
	// map would read as slot 0, another client's.
	slots := map[uint32]int{}
	all.until(t, "a server session for every client", func() bool {
		clear(slots)
		inLoop(t, b, func() {
			for slot, s := range b.sessions {
				if s.Active() {
					slots[b.connData[slot]] = slot
				}
			}
		})
		return len(slots) == len(all)
	})
	all.runFor(t, 300*time.Millisecond)

	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	heap0 := enet.CHeapBytes()

	// The churner connects and drops connections from its own source address as fast as it can.
	churn, err := enet.NewHost(enet.Config{Address: netip.MustParseAddrPort("127.0.0.2:0"), Peers: 8, Channels: Channels})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(churn.Destroy)
	garbage, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.Address()))
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()

	staller.paused = true
	payload := make([]byte, 250)
	var churnEv enet.Event
	parkerSlot, flooderSlot := slots[12], slots[13]
	srv.Store(b)
	watched.Store(int64(parkerSlot) + 1)
	deadline := time.Now().Add(testDeadline)
	for round := 0; ; round++ {
		if time.Now().After(deadline) {
			t.Fatal("the staller and the flooder were not both closed in time")
		}
		_, stallDone := closedWith(slots[10])
		_, parkDone := closedWith(parkerSlot)
		_, floodDone := closedWith(flooderSlot)
		if stallDone && parkDone && floodDone && round > 2000 {
			break
		}
		for _, fl := range []struct {
			bt    *bot
			ch    uint8
			flags enet.PacketFlags
		}{{parker, ChannelReliable, enet.Reliable}, {flooder, ChannelSnapshot, enet.Unreliable}} {
			if fl.bt.down || !fl.bt.up {
				continue
			}
			for range 20 {
				cmd, err := fl.bt.cl.AppendCommand(nil, payload)
				if err != nil {
					t.Fatal(err)
				}
				_ = fl.bt.peer.Send(fl.ch, cmd, fl.flags)
			}
		}
		if malformed.up && !malformed.down && round%100 == 0 {
			for _, m := range [][]byte{
				{}, {0xff}, {protocol.Version<<4 | byte(protocol.MsgAck), 1, 2}, {protocol.Version<<4 | byte(protocol.MsgSnapshot)},
				append(pingMsgBytes(), 0), // a trailing byte
				make([]byte, 1200),        // over maxInboundMessageBytes: the session drops it
			} {
				_ = malformed.peer.Send(ChannelSnapshot, m, enet.Reliable)
			}
			// Over the transport's limit: the server's ENet drops the fragments. Unreliable, or
			// the client's own ENet would resend them until it gave up on the connection.
			_ = malformed.peer.Send(ChannelSnapshot, make([]byte, 5000), enet.UnreliableFragment)
			_, _ = garbage.Write([]byte{0xde, 0xad})
		}
		if _, err := churn.Connect(b.Address(), Channels, 99); err == nil {
			for range 3 {
				if ok, _ := churn.Service(&churnEv, 0); ok && churnEv.Type == enet.EventConnect {
					churnEv.Peer.DisconnectNow(0)
				}
			}
		}
		for i := range churn.PeerCount() {
			if p := churn.Peer(i); p.State() != enet.StateDisconnected && round%50 == 0 {
				p.Reset()
			}
		}
		all.service(t)
		time.Sleep(time.Millisecond)
	}
	maxWaiting, maxInbox := peakWaiting.Load(), int(peakInbox.Load())

	if code, _ := closedWith(slots[10]); code != protocol.CloseNoPing {
		t.Errorf("the client that stopped reading was closed with %d, want %d", code, protocol.CloseNoPing)
	}
	if code, _ := closedWith(flooderSlot); code != protocol.CloseAbuse {
		t.Errorf("the flooder was closed with %d, want %d", code, protocol.CloseAbuse)
	}
	if code, _ := closedWith(parkerSlot); code != protocol.CloseAbuse && code != protocol.CloseNoPing {
		t.Errorf("the parker was closed with %d, want %d or %d", code, protocol.CloseAbuse, protocol.CloseNoPing)
	}
	limit := uint64(d.Memory.MaxParkedBytesPerConnection) + uint64(max(int(d.Memory.MaxInboundMessageBytes), maxTransportPacketBytes))
	if maxWaiting > limit || maxInbox > int(d.Memory.MaxPendingBytesPerConnection) {
		t.Errorf("the parker made the server hold %d bytes in ENet (limit %d) and %d in its inbox (limit %d)",
			maxWaiting, limit, maxInbox, d.Memory.MaxPendingBytesPerConnection)
	}
	if malformed.down {
		t.Errorf("the malformed client was disconnected (%d): a malformed message is dropped, not punished", malformed.code)
	}
	var mal PeerStat
	var refusals, garbageCount uint64
	inLoop(t, b, func() {
		mal = statOf(b.sessions[slots[11]])
		refusals = b.host.ConnectRefusals()
		garbageCount = b.host.MalformedDatagrams()
	})
	if mal.Counters.Malformed == 0 || mal.Counters.Oversize == 0 || garbageCount == 0 {
		t.Errorf("malformed client counters %+v, garbage datagrams %d", mal.Counters, garbageCount)
	}
	if refusals == 0 {
		t.Error("the connect churn was never rate-limited")
	}
	if maxWaiting == 0 {
		t.Error("the parker never made the transport hold data: the ceiling was not exercised")
	}
	t.Logf("parker: up to %d bytes waiting in ENet, %d in the inbox; %d connect refusals, %d garbage datagrams",
		maxWaiting, maxInbox, refusals, garbageCount)
	for _, bt := range good {
		if bt.down {
			t.Errorf("good client %d was disconnected (%d)", bt.data, bt.code)
		}
	}
	// The attack never made a good session skip. Its rate is the congestion controller's, which a
	// loaded machine (late acknowledgements) may lower toward congestion.minSendHz, never below.
	for _, p := range b.PeerStats(nil) {
		for _, bt := range good {
			if slots[bt.data] != p.Stats.Slot {
				continue
			}
			if c := p.Counters; c.SkipsBusy+c.SkipsPool != 0 || p.Stats.SendRateHz < netcode.DefaultCongestionMinSendHz/2 {
				t.Errorf("good client %d during the attack: %.0f Hz, %+v", bt.data, p.Stats.SendRateHz, c)
			}
		}
	}
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	if grown := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc); grown > 32<<20 {
		t.Errorf("Go heap grew by %d bytes under attack", grown)
	}
	if grown := int64(enet.CHeapBytes()) - int64(heap0); grown > 32<<20 {
		t.Errorf("C heap grew by %d bytes under attack", grown)
	}
	inLoop(t, b, func() { b.game.(*demo.Game).SetFrozen(true) })
	good.until(t, "good clients converged", func() bool { return mismatches(t, b, good) == 0 })
}

func pingMsgBytes() []byte { return protocol.AppendPing(nil, &protocol.Ping{}) }
