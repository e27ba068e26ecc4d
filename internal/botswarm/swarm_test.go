package botswarm

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/internal/linkem"
)

func runSwarm(t *testing.T, cfg Config) (*Swarm, *Report) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+testDeadline)
	defer cancel()
	r, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

// TestSwarmMeasuresSource checks every bot's counters against what the source sent it: frames
// (not packets) make the snapshot rate, bytes add up, the sequence shows no loss, and the
// per-second series match the source's send times.
func TestSwarmMeasuresSource(t *testing.T) {
	tests := []struct {
		name            string
		hz              int
		packetsPerFrame int
		records         int
		commandsHz      float64
		command         func(*rand.Rand, []byte) []byte
		commandBytes    int
		layout          *protocol.Layout
	}{
		{name: "one packet per frame", hz: 30, packetsPerFrame: 1, records: 8},
		{name: "three packets per frame with random commands", hz: 20, packetsPerFrame: 3, records: 20, commandsHz: 10, commandBytes: DefaultCommandBytes},
		{
			name: "game commands", hz: 30, packetsPerFrame: 1, records: 8, commandsHz: 30, commandBytes: 3,
			command: func(r *rand.Rand, dst []byte) []byte { return append(dst, 1, byte(r.Uint32()), 2) },
		},
		{name: "a game's schema", hz: 30, packetsPerFrame: 2, records: 8, layout: (&protocol.Schema{Kinds: []protocol.KindSchema{
			{ID: 1, Name: "unit", Parts: protocol.PartPosition | protocol.PartRotation, Fields: []protocol.Field{protocol.Uint("hp", 7), protocol.Uint("t", 20)}},
		}}).MustCompile()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const bots = 3
			// The source stops sending well before the bots close, so every packet it sent has
			// arrived when the counts are compared.
			src := startSource(t, sourceConfig{hz: tc.hz, packetsPerFrame: tc.packetsPerFrame, records: tc.records, sendFor: 2500 * time.Millisecond, layout: tc.layout})
			s, r := runSwarm(t, Config{
				Server:     src.addr(),
				Classes:    []Class{{Name: "direct", Count: bots}},
				Duration:   4 * time.Second,
				CommandsHz: tc.commandsHz,
				Command:    tc.command,
				Seed:       7,
				Layout:     tc.layout,
			})
			sent := src.all()
			if len(sent) != bots {
				t.Fatalf("source saw %d peers, want %d", len(sent), bots)
			}
			if len(r.Clients) != bots {
				t.Fatalf("report has %d clients, want %d", len(r.Clients), bots)
			}
			// Bots and source peers pair up by their sequence of frames: match by frame count is
			// ambiguous, so compare the sorted multisets of (frames, packets, bytes).
			want := map[[3]int]int{}
			for _, p := range sent {
				want[[3]int{p.frames, p.packets, p.bytes}]++
				if p.pings < 2 {
					t.Errorf("source got %d PINGs from a peer over 4 s, want at least 2", p.pings)
				}
				if p.acks == 0 || p.lastAcked != p.seq-1 {
					t.Errorf("source got %d ACKs, last acknowledging %d, want the last packet %d acknowledged", p.acks, p.lastAcked, p.seq-1)
				}
				if tc.commandsHz > 0 && (p.commands < 5 || float64(p.commands) > 4*tc.commandsHz+1) {
					t.Errorf("source got %d COMMANDs at %v Hz over 4 s", p.commands, tc.commandsHz)
				}
				if p.cmdSizes[tc.commandBytes] != p.commands {
					t.Errorf("COMMAND payload sizes %v, want all %d bytes", p.cmdSizes, tc.commandBytes)
				}
				if tc.commandsHz == 0 && p.commands != 0 {
					t.Errorf("source got %d COMMANDs with commands off", p.commands)
				}
				if p.bad != 0 {
					t.Errorf("source got %d malformed messages", p.bad)
				}
				if p.hellos != 1 {
					t.Errorf("source got %d HELLOs from a peer, want 1", p.hellos)
				}
			}
			for _, c := range r.Clients {
				tot := c.Totals
				if c.State != StateDone {
					t.Errorf("client %d state %q (%s), want %q", c.ID, c.State, c.Error, StateDone)
				}
				key := [3]int{int(tot.Snapshots), int(tot.Packets), int(tot.Bytes)}
				if want[key] == 0 {
					t.Errorf("client %d received (snapshots, packets, bytes) %v; source sent %v", c.ID, key, want)
				}
				want[key]--
				if tot.Packets != tot.Snapshots*uint64(tc.packetsPerFrame) {
					t.Errorf("client %d: %d packets for %d snapshots at %d packets per frame", c.ID, tot.Packets, tot.Snapshots, tc.packetsPerFrame)
				}
				if tot.PacketsLost != 0 || tot.PacketsLate != 0 || tot.BadMessages != 0 || tot.RecordsUnapplied != 0 {
					t.Errorf("client %d on a clean loopback: %+v", c.ID, tot)
				}
				if tot.RecordsApplied != tot.Packets*uint64(tc.records) {
					t.Errorf("client %d applied %d records of %d packets x %d", c.ID, tot.RecordsApplied, tot.Packets, tc.records)
				}
				var hz, bytes, applied int
				for _, sec := range c.Series {
					hz += sec.Hz
					bytes += sec.Bytes
					applied += sec.Applied
				}
				if hz != int(tot.Snapshots) || bytes != int(tot.Bytes) || applied != int(tot.RecordsApplied) {
					t.Errorf("client %d: series sum to %d snapshots, %d bytes, %d records; totals %+v", c.ID, hz, bytes, applied, tot)
				}
				if c.Summary.AgeP95Ms < 0 || c.Summary.AgeP95Ms > 1000 {
					t.Errorf("client %d: snapshot age p95 %v ms on loopback", c.ID, c.Summary.AgeP95Ms)
				}
			}
			checkSeriesAgainstSource(t, s.StartTime(), r, sent)
		})
	}
}

// checkSeriesAgainstSource checks every bot's per-second rate against the times some source peer
// sent its frames (bots and peers are paired by total frames). A frame is counted in the second
// it arrived in, never before it was sent, so by the end of any second a bot has counted at most
// the frames sent by then; and it has counted at least those sent a whole second earlier (a
// delivery delay of a second would be a hang, not load).
func checkSeriesAgainstSource(t *testing.T, start time.Time, r *Report, sent []sourcePeer) {
	t.Helper()
	for _, c := range r.Clients {
		var peer *sourcePeer
		for i := range sent {
			if sent[i].frames == int(c.Totals.Snapshots) {
				peer = &sent[i]
				break
			}
		}
		if peer == nil {
			t.Fatalf("client %d: no source peer sent %d frames", c.ID, c.Totals.Snapshots)
		}
		sentBy := func(t int) int { // frames sent before second t began
			n := 0
			for _, at := range peer.frameTimes {
				if at.Before(start.Add(time.Duration(t) * time.Second)) {
					n++
				}
			}
			return n
		}
		counted := 0
		for i, sec := range c.Series {
			counted += sec.Hz
			if hi, lo := sentBy(i+1), sentBy(i); counted > hi || counted < lo {
				t.Errorf("client %d: %d frames counted by the end of second %d; the source had sent %d by then and %d a second earlier",
					c.ID, counted, i, hi, lo)
			}
		}
	}
}

// TestSwarmRecordsCloseCode checks that a session the server closes is reported with its code.
func TestSwarmRecordsCloseCode(t *testing.T) {
	src := startSource(t, sourceConfig{hz: 30, packetsPerFrame: 1, records: 2, closeAfter: 10, closeCode: protocol.CloseNoPing})
	_, r := runSwarm(t, Config{Server: src.addr(), Classes: []Class{{Name: "c", Count: 2}}, Duration: 3 * time.Second})
	// ENet drops what it still holds for the application when the disconnect arrives, so the
	// last frames before it may be missing.
	for _, c := range r.Clients {
		if c.State != StateClosed || c.CloseCode != protocol.CloseNoPing || c.Totals.Snapshots > 10 || c.ClosedMs < c.ConnectedMs {
			t.Errorf("client %d: state %q code %d after %d snapshots, closed at %d ms (connected %d ms); want %q %d after at most 10",
				c.ID, c.State, c.CloseCode, c.Totals.Snapshots, c.ClosedMs, c.ConnectedMs, StateClosed, protocol.CloseNoPing)
		}
	}
	if got := r.Classes[0].CloseCodes[protocol.CloseNoPing]; got != 2 {
		t.Errorf("class close codes %v, want 2 x %d", r.Classes[0].CloseCodes, protocol.CloseNoPing)
	}
}

// TestSwarmConnectTimeout checks that a bot whose handshake is never answered times out: the
// source's connect limiter admits one CONNECT from 127.0.0.1 and drops every later one.
func TestSwarmConnectTimeout(t *testing.T) {
	src := startSource(t, sourceConfig{connectRate: enet.ConnectRate{PerSecond: 1e-6, Burst: 1}})
	_, r := runSwarm(t, Config{
		Server:         src.addr(),
		Classes:        []Class{{Name: "c", Count: 2}},
		Duration:       5 * time.Second,
		Ramp:           500 * time.Millisecond,
		ConnectTimeout: 2 * time.Second,
		Bind:           []netip.Addr{netip.MustParseAddr("127.0.0.1")},
	})
	first, second := r.Clients[0], r.Clients[1]
	if first.State != StateDone {
		t.Errorf("first bot: state %q, want %q", first.State, StateDone)
	}
	if second.State != StateTimeout || second.ConnectedMs != -1 || second.ClosedMs < 2500 {
		t.Errorf("second bot: state %q, connected at %d ms, given up at %d ms; want %q, never, after 2500 ms",
			second.State, second.ConnectedMs, second.ClosedMs, StateTimeout)
	}
	if got := r.Classes[0].States; got[StateDone] != 1 || got[StateTimeout] != 1 {
		t.Errorf("class states %v", got)
	}
}

// TestSwarmThroughLinkem checks loss accounting against a link emulator dropping packets. The
// loss starts once the bots are connected, so no handshake depends on luck.
func TestSwarmThroughLinkem(t *testing.T) {
	src := startSource(t, sourceConfig{hz: 50, packetsPerFrame: 1, records: 30, sendFor: 3 * time.Second})
	px, err := linkem.New(linkem.Config{Listen: "127.0.0.1:0", Upstream: src.addr().String(), Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	s, err := New(Config{
		Server:   src.addr(),
		Classes:  []Class{{Name: "lossy", Count: 2, Addr: px.Addr()}, {Name: "direct", Count: 1}},
		Duration: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for s.Progress().States[StateConnected] < 3 {
		if ctx.Err() != nil {
			t.Fatalf("bots did not connect: %v", s.Progress().States)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := px.SetProfile(linkem.DefaultSelector(), linkem.Profile{Down: linkem.Impairment{Loss: 0.2}}); err != nil {
		t.Fatal(err)
	}
	r := s.Wait()
	sent := src.all()
	st := px.Stats()
	for _, c := range r.Clients {
		tot := c.Totals
		if c.Class == "direct" {
			if tot.PacketsLost != 0 {
				t.Errorf("direct client lost %d packets", tot.PacketsLost)
			}
			continue
		}
		var ls *linkem.ClientStats
		for i := range st.Clients {
			if st.Clients[i].Addr.Port() == mustPort(t, c.Local) {
				ls = &st.Clients[i]
			}
		}
		if ls == nil {
			t.Fatalf("client %d (%s) not in linkem's stats", c.ID, c.Local)
		}
		// linkem counts datagrams, and ENet packs several packets (and its own commands) into
		// one, so the two counts differ; both must show the loss.
		if tot.PacketsLost == 0 || ls.Down.DroppedLoss == 0 {
			t.Errorf("client %d counted %d packets lost; linkem dropped %d datagrams", c.ID, tot.PacketsLost, ls.Down.DroppedLoss)
		}
		// Every packet the source sent is received or counted lost, except losses at the very
		// end, which no later packet reveals.
		var peerPackets int
		for _, p := range sent {
			if p.packets >= int(tot.Packets+tot.PacketsLost) && (peerPackets == 0 || p.packets < peerPackets) {
				peerPackets = p.packets
			}
		}
		if seen := int(tot.Packets + tot.PacketsLost); peerPackets == 0 || peerPackets-seen > 10 {
			t.Errorf("client %d: received %d + lost %d, source sent %d", c.ID, tot.Packets, tot.PacketsLost, peerPackets)
		}
		if c.Summary.LossPct <= 0 {
			t.Errorf("client %d: loss %v%%", c.ID, c.Summary.LossPct)
		}
	}
}

func mustPort(t *testing.T, addr string) uint16 {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}
