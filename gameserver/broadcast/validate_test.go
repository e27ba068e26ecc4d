package broadcast

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// TestValidateRefusesWithField: every config that breaks a rule — the CRD's or this server's own —
// is refused whole, naming the field, and the running config stays.
func TestValidateRefusesWithField(t *testing.T) {
	b := startServer(t, playing(t, smallWorld(20), false, Options{}))
	before := b.Config().Hash()
	cases := []struct {
		name  string
		cfg   netcode.NetcodeConfig
		field string
	}{
		// The CRD's rules, as netcode.Validate applies them.
		{"tick rate", netcode.NetcodeConfig{TickRateHz: 500}, "tickRateHz"},
		{"min send above tick", netcode.NetcodeConfig{TickRateHz: 20, Congestion: netcode.CongestionConfig{MinSendHz: 30}}, "congestion.minSendHz"},
		{"frame below a packet", netcode.NetcodeConfig{Backpressure: netcode.BackpressureConfig{FrameBytes: 512}}, "backpressure.frameBytes"},
		{"frame pool below two frames", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{FramePoolBudgetBytes: 65536}, Backpressure: netcode.BackpressureConfig{FrameBytes: 65536}}, "memory.framePoolBudgetBytes"},
		{"ingress below a message", netcode.NetcodeConfig{Ingress: netcode.IngressConfig{BytesPerSecond: 512}}, "ingress.bytesPerSecond"},
		{"inbox below a message", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{MaxPendingBytesPerConnection: 512}}, "memory.maxPendingBytesPerConnection"},
		{"session rate below a packet", netcode.NetcodeConfig{Budget: netcode.BudgetConfig{SessionBytesPerSecond: i32(600)}}, "budget.sessionBytesPerSecond"},
		// This server's invariants.
		{"push log past the history", netcode.NetcodeConfig{Backpressure: netcode.BackpressureConfig{PushLogTicks: 100}}, "backpressure.pushLogTicks"},
		{"state pool below one session", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{StatePoolBudgetBytes: 65536}}, "memory.statePoolBudgetBytes"},
		{"ingress pool below one inbox", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{IngressPoolBudgetBytes: 65536, MaxPendingBytesPerConnection: 131072}}, "memory.ingressPoolBudgetBytes"},
		{"inbound messages over the transport's limit", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{MaxInboundMessageBytes: 2048}}, "memory.maxInboundMessageBytes"},
		{"parked data changed live", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{MaxParkedBytesPerConnection: 131072}}, "memory.maxParkedBytesPerConnection"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		err := resolveAndApply(ctx, b, tc.cfg)
		var ve *netcode.ValidationError
		if !errors.As(err, &ve) || netcode.FirstField(err) != tc.field {
			t.Errorf("%s: %v, want a ValidationError naming %s", tc.name, err, tc.field)
		}
	}
	if b.Config().Hash() != before {
		t.Fatal("a refused config changed the running one")
	}
	// The largest push log the default world allows is accepted.
	if err := resolveAndApply(ctx, b, netcode.NetcodeConfig{Backpressure: netcode.BackpressureConfig{PushLogTicks: 56}}); err != nil {
		t.Fatalf("push log of 56 ticks: %v", err)
	}
}

// TestPoolsRefuseConnections: a connection the state or ingress pool has no room for is turned
// away with 1013 (try again later), and the sessions already in keep running.
func TestPoolsRefuseConnections(t *testing.T) {
	b := startServer(t, playing(t, smallWorld(50), false, Options{}))
	base := int64(b.states.BaseBytes())
	cases := []struct {
		name string
		cfg  netcode.NetcodeConfig
		fits int
	}{
		{"state pool of one session and a half", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{StatePoolBudgetBytes: base + base/2}}, 1},
		{"ingress pool of four inboxes", netcode.NetcodeConfig{Memory: netcode.MemoryConfig{IngressPoolBudgetBytes: 65536}}, 4},
	}
	ctx := context.Background()
	for i, tc := range cases {
		if err := resolveAndApply(ctx, b, tc.cfg); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var bots swarm
		for j := range tc.fits + 1 {
			bots = append(bots, newBot(t, b.Address(), uint32(100*i+j+1)))
			bots.until(t, tc.name+": connect or refusal", func() bool {
				last := bots[len(bots)-1]
				return last.up && (last.down || j < tc.fits)
			})
			if j < tc.fits {
				bots.runFor(t, 100*time.Millisecond) // its state grows past a fresh session's
			}
		}
		refused := bots[tc.fits]
		if refused.code != protocol.CloseStalled {
			t.Errorf("%s: connection %d closed with %d, want %d", tc.name, tc.fits+1, refused.code, protocol.CloseStalled)
		}
		for _, bt := range bots[:tc.fits] {
			if bt.down {
				t.Errorf("%s: an admitted client was disconnected (%d)", tc.name, bt.code)
			}
			bt.peer.Disconnect(0)
		}
		bots.until(t, tc.name+": disconnects", func() bool { return b.Tick() > 0 && len(b.Peers(nil)) == 0 })
	}
}
