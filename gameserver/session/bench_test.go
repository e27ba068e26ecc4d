package session

import (
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
)

// BenchmarkWarmSession measures a warm session's send path (a tick that builds and sends its
// frame) and receive path (its client's ACK and PING) on a busy world; both allocate nothing.
func BenchmarkWarmSession(b *testing.B) {
	// An inbound budget that the receive loop, a million messages a second, stays within.
	nc := netcode.NetcodeConfig{Ingress: netcode.IngressConfig{BytesPerSecond: 1 << 24}}
	h := newHarness(b, busyWorld(300), nc, 120)
	p := h.addPeer()
	h.run(600)
	buf := make([]byte, 0, 256)
	out := &toClient{cl: p.cl}
	b.Run("send", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			h.w.Step(h.dt)
			h.tick = uint64(h.w.Store().Tick())
			h.nowMs += 16
			h.nanos += 16e6
			out.nowMs = h.nowMs
			p.s.Tick(h.now(), p.link, out)
			b.StopTimer()
			if ack, ok := p.cl.AppendAck(buf[:0]); ok {
				_ = p.s.HandleMessage(ack, h.nowMs)
			}
			b.StartTimer()
		}
	})
	b.Run("receive", func(b *testing.B) {
		ping := p.cl.AppendPing(nil, h.nowMs)
		ack, ok := p.cl.AppendAck(nil)
		if !ok {
			b.Fatal("no ACK to send")
		}
		b.ReportAllocs()
		for i := range b.N {
			if i%64 == 0 {
				h.nowMs++
			}
			if err := p.s.HandleMessage(ack, h.nowMs); err != nil {
				b.Fatal(err)
			}
			if err := p.s.HandleMessage(ping, h.nowMs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
