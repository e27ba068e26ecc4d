package session

import (
	"errors"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// FuzzHandleMessage feeds arbitrary inbound messages to a live session between ticks: it must
// never panic, must count every message, and must keep serving frames afterwards.
func FuzzHandleMessage(f *testing.F) {
	f.Add(ackMsg(protocol.Ack{Latest: 3, Received: 0b101, LastAppliedTick: 9}))
	f.Add(pingMsg(protocol.Ping{ClientTimeMs: 1, LastAppliedTick: 2}))
	f.Add(cmdMsg(f, []byte("move")))
	var a protocol.Ack
	for i := range 40 {
		a.AddNeedFull(uint16(i * 7))
	}
	f.Add(ackMsg(a))
	f.Add([]byte{})
	f.Add([]byte{protocol.Version<<4 | byte(protocol.MsgAck), 0xff, 0xff})
	var (
		h *harness
		p *peer
	)
	// start gives the fuzzer a fresh live session; inputs run against the same one until a
	// sequence of them ends it (abuse closes it with 1008), and the next input gets a new one.
	start := func(t testing.TB) {
		h = newHarness(t, busyWorld(200), netcode.NetcodeConfig{}, 120)
		p = h.addPeer()
		p.ack = false
		// The fuzzed messages come from the same client, so they spend its inbound budget: once
		// they put it a window in debt, its own PINGs are refused too, as they would be.
		h.ownRefused = func(err error) bool { return errors.Is(err, ErrRefused) }
		h.run(20)
	}
	start(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		if !p.s.Active() {
			start(t)
		}
		h.t = t
		before := p.s.Counters().MessagesReceived
		_ = p.s.HandleMessage(msg, h.nowMs)
		if p.s.Counters().MessagesReceived != before+1 {
			t.Fatal("message not counted")
		}
		h.step()
		p.s.DrainCommands(func(Command) {})
	})
}
