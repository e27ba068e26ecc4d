package broadcast

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

var (
	testKey      = connecttoken.Key{ID: 7, Secret: [connecttoken.KeyBytes]byte{0x5e, 0xc2, 0xe7}}
	testNextKey  = connecttoken.Key{ID: 8, Secret: [connecttoken.KeyBytes]byte{0x11, 0x22}}
	testAlloc    = "5f0c7a2e-9d3b-4c1e-8a6f-2b7d9e4c1a30"
	tokenModeCfg = func(mode netcode.ConnectTokenMode) netcode.NetcodeConfig {
		return netcode.NetcodeConfig{ConnectTokens: netcode.ConnectTokensConfig{Mode: mode}}
	}
)

// startTokenServer starts a recorder server checking tokens in mode, with testKey, the server's
// own loopback address and port as its published address, and testAlloc as its allocation.
func startTokenServer(t *testing.T, mode netcode.ConnectTokenMode) (*Broadcaster, *recorder) {
	t.Helper()
	b, g := startRecorder(t, netcode.NetcodeConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if err := b.SetConnectKeys(ctx, []connecttoken.Key{testKey}, b.Address()); err != nil {
		t.Fatal(err)
	}
	if err := b.SetAllocations(ctx, testAlloc); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, netcode.MustResolve(tokenModeCfg(mode))); err != nil {
		t.Fatal(err)
	}
	return b, g
}

// issueFor issues a token of player for the server at addr, with allocation and deadline.
func issueFor(t testing.TB, k *connecttoken.Key, addr netip.AddrPort, allocation, player string, deadline time.Time) []byte {
	t.Helper()
	tok, err := connecttoken.Issue(nil, k, &connecttoken.Claims{Server: addr, Allocation: allocation, Player: player, Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tokenBot is a bot whose HELLO carries tok.
func tokenBot(t testing.TB, server netip.AddrPort, data uint32, tok []byte) *bot {
	t.Helper()
	bt := newBot(t, server, data)
	if err := bt.cl.SetToken(tok); err != nil {
		t.Fatal(err)
	}
	return bt
}

// TestConnectTokensRequired: with tokens required, a client with a valid token joins and the game
// gets its player id; every other client is refused before its session, with the close code and
// the CLOSE of its reason, and counted by reason: no token (4005), a malformed or a forged one
// (4006), an expired one (4007), one for another server (4008) or allocation (4009), and a token
// already used from another address (4010).
func TestConnectTokensRequired(t *testing.T) {
	b, g := startTokenServer(t, netcode.ConnectTokensRequired)
	addr := b.Address()
	soon := time.Now().Add(time.Minute)
	good := issueFor(t, &testKey, addr, testAlloc, "alice", soon)
	forged := bytes.Clone(good)
	forged[len(forged)-1] ^= 0x80
	otherPort := netip.AddrPortFrom(addr.Addr(), addr.Port()+1)
	cases := []struct {
		name string
		tok  []byte
		code uint32
	}{
		{"no token", nil, connecttoken.CloseMissing},
		{"malformed", []byte("not a token"), connecttoken.CloseInvalid},
		{"forged", forged, connecttoken.CloseInvalid},
		{"signed with another key", issueFor(t, &testNextKey, addr, testAlloc, "mallory", soon), connecttoken.CloseInvalid},
		{"expired", issueFor(t, &testKey, addr, testAlloc, "bob", time.Now().Add(-time.Second)), connecttoken.CloseExpired},
		{"another server", issueFor(t, &testKey, otherPort, testAlloc, "carol", soon), connecttoken.CloseWrongServer},
		{"another allocation", issueFor(t, &testKey, addr, "another-allocation", "dave", soon), connecttoken.CloseWrongAllocation},
	}
	alice := tokenBot(t, addr, 1, good)
	bots := swarm{alice}
	bots.until(t, "alice joined", func() bool { return alice.cl.Len() > 0 })
	// The captured token replayed from another address (another client host: another port).
	replay := tokenBot(t, addr, 2, good)
	bots = append(bots, replay)
	for i, tc := range cases {
		bots = append(bots, tokenBot(t, addr, uint32(10+i), tc.tok))
	}
	bots.until(t, "every refusal", func() bool {
		for _, bt := range bots[1:] {
			if !bt.down {
				return false
			}
		}
		return true
	})
	check := func(name string, bt *bot, code uint32) {
		closed, ok := bt.cl.Closed()
		if bt.code != code || !ok || closed.Code != code || closed.Reason == "" || bt.cl.Len() != 0 {
			t.Errorf("%s: disconnect %d, CLOSE %+v, %d entities in view; want %d and a reason, nothing sent",
				name, bt.code, closed, bt.cl.Len(), code)
		}
	}
	check("the token replayed from another address", replay, connecttoken.CloseReplayed)
	for i, tc := range cases {
		check(tc.name, bots[2+i], tc.code)
	}
	bots.runFor(t, 100*time.Millisecond)
	if alice.down {
		t.Fatalf("alice was disconnected (%d)", alice.code)
	}
	var live int
	var ok uint64
	var bad [connecttoken.NumReasons]uint64
	inLoop(t, b, func() { live, ok, bad = b.live, b.tokenOK, b.tokenBad })
	want := [connecttoken.NumReasons]uint64{connecttoken.Missing: 1, connecttoken.Malformed: 1, connecttoken.Forged: 2, connecttoken.Expired: 1,
		connecttoken.WrongServer: 1, connecttoken.WrongAllocation: 1, connecttoken.Replayed: 1}
	if live != 1 || ok != 1 || bad != want {
		t.Errorf("%d live sessions, %d tokens accepted, refusals %v; want 1, 1, %v", live, ok, bad, want)
	}
	g.mu.Lock()
	joins := slices.Clone(g.joins)
	g.mu.Unlock()
	if len(joins) != 1 || joins[0].PlayerID != "alice" || joins[0].ConnectData != 1 {
		t.Errorf("the game's joins: %+v, want alice's alone", joins)
	}
}

// TestConnectTokensModes: Optional admits a client without a token (no player id) and refuses an
// invalid one; Disabled ignores tokens altogether; the mode changes live, and a server without
// keys refuses a config that needs them, naming the field.
func TestConnectTokensModes(t *testing.T) {
	b, g := startTokenServer(t, netcode.ConnectTokensOptional)
	addr := b.Address()
	soon := time.Now().Add(time.Minute)
	plain := newBot(t, addr, 1)
	withToken := tokenBot(t, addr, 2, issueFor(t, &testKey, addr, testAlloc, "erin", soon))
	expired := tokenBot(t, addr, 3, issueFor(t, &testKey, addr, testAlloc, "frank", time.Now().Add(-time.Second)))
	bots := swarm{plain, withToken, expired}
	bots.until(t, "optional mode", func() bool { return plain.cl.Len() > 0 && withToken.cl.Len() > 0 && expired.down })
	if expired.code != connecttoken.CloseExpired {
		t.Errorf("an expired token in Optional mode: %d", expired.code)
	}
	ids := func() map[uint32]string {
		g.mu.Lock()
		defer g.mu.Unlock()
		m := map[uint32]string{}
		for _, p := range g.joins {
			m[p.ConnectData] = p.PlayerID
		}
		return m
	}
	if got := ids(); len(got) != 2 || got[1] != "" || got[2] != "erin" {
		t.Errorf("joins in Optional mode: %v", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if err := b.Apply(ctx, netcode.MustResolve(tokenModeCfg(netcode.ConnectTokensDisabled))); err != nil {
		t.Fatal(err)
	}
	forged := tokenBot(t, addr, 4, []byte("anything at all"))
	bots = append(bots, forged)
	bots.until(t, "disabled mode", func() bool { return forged.cl.Len() > 0 })
	if got := ids(); got[4] != "" {
		t.Errorf("Disabled mode handed the game a player id: %q", got[4])
	}
	if plain.down || withToken.down {
		t.Error("a mode change disconnected a player")
	}

	// A server that holds no keys refuses Optional and Required, before and after it starts.
	bare, _ := startRecorder(t, netcode.NetcodeConfig{})
	err := bare.Apply(ctx, netcode.MustResolve(tokenModeCfg(netcode.ConnectTokensRequired)))
	if netcode.FirstField(err) != "connectTokens.mode" {
		t.Errorf("Required without keys: %v", err)
	}
	rec := newRecorder(t)
	_, err = New(Options{Game: rec, Store: rec.st, Address: loopback, Netcode: netcode.MustResolve(tokenModeCfg(netcode.ConnectTokensOptional))})
	if netcode.FirstField(errors.Unwrap(err)) != "connectTokens.mode" {
		t.Errorf("New with Optional and no keys: %v", err)
	}
	if err := bare.SetConnectKeys(ctx, []connecttoken.Key{testKey}, netip.AddrPort{}); err == nil {
		t.Error("keys without the server's address were taken")
	}
	if err := bare.SetConnectKeys(ctx, []connecttoken.Key{testKey, testKey}, bare.Address()); err == nil {
		t.Error("two keys of one id were taken")
	}
	if ids, _, _ := bare.ConnectKeys(ctx); ids != nil {
		t.Errorf("refused keys were installed: %v", ids)
	}
}

// TestConnectTokenRotation: during a rotation the server holds the new key and the old one, and
// players with tokens of either join; once the old key is retired, its tokens are refused.
func TestConnectTokenRotation(t *testing.T) {
	b, _ := startTokenServer(t, netcode.ConnectTokensRequired)
	addr := b.Address()
	soon := time.Now().Add(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	oldTok := issueFor(t, &testKey, addr, testAlloc, "old", soon)
	if err := b.SetConnectKeys(ctx, []connecttoken.Key{testNextKey, testKey}, addr); err != nil {
		t.Fatal(err)
	}
	if ids, server, _ := b.ConnectKeys(ctx); !slices.Equal(ids, []uint32{8, 7}) || server != addr {
		t.Fatalf("keys %v at %v", ids, server)
	}
	a := tokenBot(t, addr, 1, oldTok)
	c := tokenBot(t, addr, 2, issueFor(t, &testNextKey, addr, testAlloc, "new", soon))
	bots := swarm{a, c}
	bots.until(t, "both keys admit", func() bool { return a.cl.Len() > 0 && c.cl.Len() > 0 })
	if err := b.SetConnectKeys(ctx, []connecttoken.Key{testNextKey}, addr); err != nil {
		t.Fatal(err)
	}
	late := tokenBot(t, addr, 3, issueFor(t, &testKey, addr, testAlloc, "late", soon))
	bots = append(bots, late)
	bots.until(t, "the retired key refused", func() bool { return late.down })
	if late.code != connecttoken.CloseInvalid || a.down || c.down {
		t.Errorf("retired key: %d; players down: %v %v", late.code, a.down, c.down)
	}
}

// TestConnectTokenFlood: a flood of forged tokens from many source addresses creates no session,
// the players already in keep being served at the tick rate, and the tick's CPU time stays within
// its period.
func TestConnectTokenFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of a few hundred connections")
	}
	var mu sync.Mutex
	var cpu []time.Duration
	g := newRecorder(t)
	// Every avatar moves every tick, so every player is sent a snapshot every tick.
	g.onStep = func(*game.Tick) {
		for _, id := range g.avatars {
			tr, _ := g.st.Get(id)
			tr.Pos[1] += 0.5
			_ = g.st.Set(id, &tr)
		}
	}
	b := startServer(t, Options{Game: g, Store: g.st, MaxPeers: 64, InterestRadius: 150,
		ConnectTokens: &ConnectTokens{Keys: []connecttoken.Key{testKey}, Allocation: testAlloc,
			Server: netip.MustParseAddrPort("127.0.0.1:1")}, // the address is set below, once bound
		Netcode: netcode.MustResolve(tokenModeCfg(netcode.ConnectTokensRequired)),
		OnTick: func(ts TickStats) {
			mu.Lock()
			cpu = append(cpu, ts.CPU)
			mu.Unlock()
		}})
	addr := b.Address()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if err := b.SetConnectKeys(ctx, []connecttoken.Key{testKey}, addr); err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(time.Minute)
	players := swarm{}
	for i := range 4 {
		players = append(players, tokenBot(t, addr, uint32(1+i), issueFor(t, &testKey, addr, testAlloc, fmt.Sprint("player-", i), soon)))
	}
	players.until(t, "players joined", func() bool {
		for _, p := range players {
			if p.cl.Len() == 0 {
				return false
			}
		}
		return true
	})
	players.runFor(t, 500*time.Millisecond)

	// The flood: 16 source addresses (127.0.0.10 to .25), each connecting 4 clients at a time
	// with a valid-looking token of a key the server does not hold, for 3 seconds.
	const sources, perSource, floodFor = 16, 4, 3 * time.Second
	forger := connecttoken.Key{ID: testKey.ID, Secret: [connecttoken.KeyBytes]byte{0xba, 0xd}}
	forged := issueFor(t, &forger, addr, testAlloc, "intruder", soon)
	mu.Lock()
	cpu = cpu[:0]
	mu.Unlock()
	var rates []float64 // the players' send rates, sampled every second of the flood
	nextSample := time.Now().Add(time.Second)
	start := time.Now()
	attempts, refused := 0, 0
	var flood []*enet.Host
	type attacker struct {
		host *enet.Host
		peer enet.Peer
		up   bool
	}
	var live []*attacker
	defer func() {
		for _, h := range flood {
			h.Destroy()
		}
	}()
	var ev enet.Event
	hello, err := protocol.AppendHello(nil, &protocol.Hello{SchemaHash: g.st.Layout().Hash(), Token: forged})
	if err != nil {
		t.Fatal(err)
	}
	for time.Since(start) < floodFor {
		for len(live) < sources*perSource {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + len(flood)%sources)}), 0)
			h, err := enet.NewHost(enet.Config{Address: src, Peers: 1, Channels: Channels})
			if err != nil {
				t.Fatal(err)
			}
			flood = append(flood, h)
			p, err := h.Connect(addr, Channels, 0)
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, &attacker{host: h, peer: p})
			attempts++
		}
		kept := live[:0]
		for _, a := range live {
			done := false
			for {
				ok, err := a.host.Service(&ev, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				switch ev.Type {
				case enet.EventConnect:
					a.up = true
					_ = a.peer.Send(ChannelReliable, hello, enet.Reliable)
				case enet.EventDisconnect:
					if ev.Data == connecttoken.CloseInvalid {
						refused++
					}
					done = true
				}
			}
			if !done {
				kept = append(kept, a)
			}
		}
		live = kept
		players.service(t)
		if time.Now().After(nextSample) {
			nextSample = nextSample.Add(time.Second)
			for _, pi := range b.Peers(nil) {
				rates = append(rates, pi.SendRateHz)
			}
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	var sessions int
	var forgedCount uint64
	inLoop(t, b, func() { sessions, forgedCount = b.live, b.tokenBad[connecttoken.Forged] })
	t.Logf("%d connection attempts with forged tokens in %v, %d refused with 4006 (%d counted)", attempts, elapsed.Round(time.Millisecond), refused, forgedCount)
	if sessions != len(players) {
		t.Errorf("%d sessions during the flood, want the %d players'", sessions, len(players))
	}
	if refused < attempts/2 || forgedCount < uint64(refused) {
		t.Errorf("%d of %d attempts refused with 4006, %d counted", refused, attempts, forgedCount)
	}
	// The players kept their rate: the server sent each of them a snapshot every tick.
	if len(rates) < len(players) || slices.Min(rates) < 0.9*netcode.DefaultTickRateHz {
		t.Errorf("the players' send rates during the flood: %v Hz, want %d each", rates, netcode.DefaultTickRateHz)
	} else {
		t.Logf("the players' send rates during the flood: %v Hz", rates)
	}
	for i, p := range players {
		if p.down {
			t.Errorf("player %d was disconnected (%d)", i, p.code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(cpu)
	period := time.Second / netcode.DefaultTickRateHz
	if p99 := cpu[len(cpu)*99/100]; p99 > period {
		t.Errorf("tick CPU p99 %v during the flood, over the %v period", p99, period)
	} else {
		t.Logf("tick CPU p99 %v during the flood (%d ticks), period %v", p99, len(cpu), period)
	}
}

// BenchmarkConnectTokens measures whole handshakes — ENet connect, HELLO, the server's check and
// the game's join, the first SNAPSHOT back, the disconnect — 32 in flight from fresh client hosts,
// against a server that does not check tokens and one that requires them, in one run. It reports
// handshakes per second and the server's CPU time per handshake on its tick thread (servicing the
// transport and running the ticks, from TickStats), so the token's share of a connect attempt
// shows even where the tick bounds the rate (the check alone is BenchmarkVerify in
// api/connecttoken).
func BenchmarkConnectTokens(b *testing.B) {
	const inFlight = 32
	for _, mode := range []netcode.ConnectTokenMode{netcode.ConnectTokensDisabled, netcode.ConnectTokensRequired} {
		b.Run("mode="+string(mode), func(b *testing.B) {
			nc := netcode.NetcodeConfig{
				Ingress:       netcode.IngressConfig{ConnectsPerSecondPerHost: 100000, ConnectBurstPerHost: 1000},
				ConnectTokens: netcode.ConnectTokensConfig{Mode: mode},
			}
			var mu sync.Mutex
			var cpu time.Duration
			opts := playing(b, demo.Config{Population: 200}, false, Options{MaxPeers: 2 * inFlight,
				ConnectTokens: &ConnectTokens{Keys: []connecttoken.Key{testKey}, Allocation: testAlloc, Server: netip.MustParseAddrPort("127.0.0.1:1")},
				OnTick: func(ts TickStats) {
					mu.Lock()
					cpu += ts.CPU + ts.ServiceCPU
					mu.Unlock()
				}})
			srv := startServer(b, opts)
			addr := srv.Address()
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			if err := srv.SetConnectKeys(ctx, []connecttoken.Key{testKey}, addr); err != nil {
				b.Fatal(err)
			}
			if err := srv.Apply(ctx, netcode.MustResolve(nc)); err != nil {
				b.Fatal(err)
			}
			type attempt struct {
				host *enet.Host
				peer enet.Peer
				cl   *client.Client
			}
			n := 0
			begin := func(a *attempt) {
				h, err := enet.NewHost(enet.Config{Peers: 1, Channels: Channels})
				if err != nil {
					b.Fatal(err)
				}
				a.host, a.cl = h, client.New()
				if mode != netcode.ConnectTokensDisabled {
					// A short deadline, so the server's replay cache holds few tokens.
					_ = a.cl.SetToken(issueFor(b, &testKey, addr, testAlloc, fmt.Sprint("p", n), time.Now().Add(2*time.Second)))
				}
				n++
				if a.peer, err = h.Connect(addr, Channels, 0); err != nil {
					b.Fatal(err)
				}
			}
			slots := make([]attempt, inFlight)
			defer func() {
				for i := range slots {
					if slots[i].host != nil {
						slots[i].host.Destroy()
					}
				}
			}()
			var ev enet.Event
			done := 0
			mu.Lock()
			cpu = 0
			mu.Unlock()
			b.ResetTimer()
			start := time.Now()
			deadline := start.Add(10 * testDeadline)
			for range b.N {
				// Top the attempts in flight up, then service them all until one completes.
				for i := range slots {
					if slots[i].host == nil {
						begin(&slots[i])
					}
				}
				for finished := false; !finished; {
					if time.Now().After(deadline) {
						b.Fatal("the handshakes did not complete within the deadline")
					}
					for i := range slots {
						a := &slots[i]
						ok, err := a.host.Service(&ev, 0)
						for ; ok && err == nil; ok, err = a.host.CheckEvents(&ev) {
							switch ev.Type {
							case enet.EventConnect:
								_ = a.peer.Send(ChannelReliable, a.cl.AppendHello(nil), enet.Reliable)
							case enet.EventReceive:
								if typ, _ := protocol.PeekType(ev.Packet.Bytes()); typ == protocol.MsgSnapshot && !finished {
									a.peer.DisconnectNow(0)
									a.host.Flush()
									a.host.Destroy()
									a.host = nil
									finished = true
									done++
								}
							case enet.EventDisconnect:
								b.Fatalf("refused: %d", ev.Data)
							}
							if a.host == nil {
								break
							}
						}
						if err != nil {
							b.Fatal(err)
						}
						if finished {
							break
						}
					}
					if !finished {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}
			elapsed := time.Since(start)
			mu.Lock()
			spent := cpu
			mu.Unlock()
			b.ReportMetric(float64(done)/elapsed.Seconds(), "handshakes/s")
			b.ReportMetric(float64(spent.Microseconds())/float64(done), "server-µs/handshake")
		})
	}
}
