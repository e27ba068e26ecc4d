package client

import (
	"errors"
	"testing"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// rec is a record to put in a test packet.
type rec struct {
	op        protocol.Op
	id        uint16
	kind      uint8
	age       uint32
	base, cur protocol.State
}

func spawn(id uint16, s protocol.State) rec {
	return rec{op: protocol.OpSpawn, id: id, kind: 2, cur: s}
}
func despawn(id uint16) rec { return rec{op: protocol.OpDespawn, id: id} }
func delta(id uint16, age uint32, base, cur protocol.State) rec {
	return rec{op: protocol.OpDelta, id: id, age: age, base: base, cur: cur}
}

func packet(t *testing.T, tick uint32, seq uint16, flags uint8, recs ...rec) []byte {
	t.Helper()
	var enc protocol.SnapshotEncoder
	enc.Begin(make([]byte, 1200), &protocol.SnapshotHeader{Tick: tick, ServerTimeMs: tick * 16, Seq: seq, Flags: flags})
	for _, r := range recs {
		var ok bool
		switch r.op {
		case protocol.OpSpawn:
			ok = enc.Spawn(r.id, r.kind, &r.cur, nil)
		case protocol.OpDelta:
			ok = enc.Delta(r.id, r.age, 0, &r.base, &r.cur, nil, nil)
		case protocol.OpDespawn:
			ok = enc.Despawn(r.id)
		}
		if !ok {
			t.Fatalf("record %+v does not fit", r)
		}
	}
	return enc.Finish()
}

func at(x int32) protocol.State {
	return protocol.State{Pos: [3]int32{x, 2 * x, 0}, Rot: protocol.YawRotation(0)}
}

func mustHandle(t *testing.T, c *Client, b []byte) {
	t.Helper()
	if err := c.HandleMessage(b, 0); err != nil {
		t.Fatal(err)
	}
}

func wantState(t *testing.T, c *Client, id uint16, want protocol.State) {
	t.Helper()
	e, ok := c.Entity(id)
	if !ok {
		t.Fatalf("entity %d missing", id)
	}
	if e.State != want {
		t.Fatalf("entity %d: %+v, want %+v", id, e.State, want)
	}
}

func TestApplySpawnDeltaDespawn(t *testing.T) {
	c := New()
	mustHandle(t, c, packet(t, 10, 0, 0, spawn(1, at(100)), spawn(5000, at(200))))
	mustHandle(t, c, packet(t, 12, 1, 0, delta(1, 2, at(100), at(110))))
	wantState(t, c, 1, at(110))
	wantState(t, c, 5000, at(200))
	// A delta against an older state still in the history resolves.
	mustHandle(t, c, packet(t, 13, 2, 0, delta(1, 3, at(100), at(120))))
	wantState(t, c, 1, at(120))
	mustHandle(t, c, packet(t, 14, 3, 0, despawn(5000)))
	if _, ok := c.Entity(5000); ok || c.Len() != 1 {
		t.Fatalf("despawned entity still in view; len %d", c.Len())
	}
	if c.LastAppliedTick() != 14 {
		t.Fatalf("last applied tick %d", c.LastAppliedTick())
	}
	n := 0
	c.Range(func(e Entity) bool {
		n++
		return e.ID == 1 && e.Kind == 2 && e.Tick == 13
	})
	if n != 1 {
		t.Fatalf("Range visited %d entities", n)
	}
	st := c.Stats()
	if st.Packets != 4 || st.RecordsApplied != 5 || st.RecordsStale != 0 || st.RecordsUnapplied != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStaleRecords(t *testing.T) {
	c := New()
	mustHandle(t, c, packet(t, 10, 0, 0, spawn(1, at(100))))
	mustHandle(t, c, packet(t, 14, 2, 0, delta(1, 4, at(100), at(140))))
	// A reordered packet of tick 12 arrives late: the view keeps tick 14, but the state of 12
	// joins the history, so a later delta against 12 resolves.
	mustHandle(t, c, packet(t, 12, 1, 0, delta(1, 2, at(100), at(120))))
	wantState(t, c, 1, at(140))
	mustHandle(t, c, packet(t, 15, 3, 0, delta(1, 3, at(120), at(150))))
	wantState(t, c, 1, at(150))
	// A late spawn cannot bring back a despawned entity.
	mustHandle(t, c, packet(t, 20, 4, 0, despawn(1)))
	mustHandle(t, c, packet(t, 18, 5, 0, spawn(1, at(180))))
	if _, ok := c.Entity(1); ok {
		t.Fatal("a stale spawn revived a despawned entity")
	}
	// A despawn of an unknown entity leaves a tombstone against late spawns too.
	mustHandle(t, c, packet(t, 30, 6, 0, despawn(9)))
	mustHandle(t, c, packet(t, 29, 7, 0, spawn(9, at(1))))
	if _, ok := c.Entity(9); ok {
		t.Fatal("a stale spawn created an entity behind a tombstone")
	}
	if st := c.Stats(); st.RecordsStale != 3 {
		t.Fatalf("%d stale records, want 3", st.RecordsStale)
	}
}

func TestNeedFullUntilSpawn(t *testing.T) {
	c := New()
	mustHandle(t, c, packet(t, 10, 0, 0, spawn(1, at(100))))
	// Baseline tick 8 was never received, and entity 2 is unknown.
	mustHandle(t, c, packet(t, 11, 1, 0, delta(1, 3, at(80), at(110)), delta(2, 1, at(0), at(1))))
	wantState(t, c, 1, at(100))
	var a protocol.Ack
	b, ok := c.AppendAck(nil)
	if !ok || protocol.DecodeAck(b, &a) != nil {
		t.Fatal("no ACK")
	}
	if got := a.NeedFull(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("NeedFull %v, want [1 2]", got)
	}
	if a.Latest != 1 || a.Received != 1 || a.LastAppliedTick != 11 {
		t.Fatalf("ack %+v", a)
	}
	// Still listed in the next ACK until a spawn arrives.
	mustHandle(t, c, packet(t, 12, 2, 0, spawn(1, at(120))))
	b, _ = c.AppendAck(b[:0])
	if protocol.DecodeAck(b, &a) != nil || len(a.NeedFull()) != 1 || a.NeedFull()[0] != 2 {
		t.Fatalf("NeedFull after spawn of 1: %v", a.NeedFull())
	}
	if c.Stats().RecordsUnapplied != 2 {
		t.Fatalf("unapplied %d", c.Stats().RecordsUnapplied)
	}
}

func TestResyncWhenTooManyMissing(t *testing.T) {
	c := New()
	var recs []rec
	for id := range uint16(protocol.MaxNeedFull + 1) {
		recs = append(recs, delta(id, 1, at(0), at(1)))
	}
	mustHandle(t, c, packet(t, 5, 0, 0, recs...))
	var a protocol.Ack
	b, _ := c.AppendAck(nil)
	if protocol.DecodeAck(b, &a) != nil || !a.Resync || len(a.NeedFull()) != protocol.MaxNeedFull {
		t.Fatalf("ack %+v with %d NeedFull", a, len(a.NeedFull()))
	}
	mustHandle(t, c, protocol.AppendReset(nil, &protocol.Reset{Tick: 6}))
	b, _ = c.AppendAck(b[:0])
	if protocol.DecodeAck(b, &a) != nil || a.Resync || len(a.NeedFull()) != 0 {
		t.Fatal("a reset did not clear Resync and NeedFull")
	}
}

func TestReset(t *testing.T) {
	for _, viaFlag := range []bool{false, true} {
		c := New()
		mustHandle(t, c, packet(t, 10, 0, 0, spawn(1, at(1)), spawn(2, at(2))))
		// The first packet of the reset frame arrives before the RESET message.
		mustHandle(t, c, packet(t, 20, 1, protocol.FlagReset, spawn(2, at(20))))
		if !viaFlag {
			mustHandle(t, c, protocol.AppendReset(nil, &protocol.Reset{Tick: 20}))
		}
		if _, ok := c.Entity(1); ok {
			t.Fatal("entity from before the reset survived it")
		}
		var ranged []uint16
		c.Range(func(e Entity) bool { ranged = append(ranged, e.ID); return true })
		if len(ranged) != 1 || ranged[0] != 2 || c.Len() != 1 {
			t.Fatalf("Range after the reset yields %v (Len %d), want only entity 2", ranged, c.Len())
		}
		wantState(t, c, 2, at(20))
		// A packet from before the reset changes nothing.
		mustHandle(t, c, packet(t, 15, 2, 0, spawn(1, at(15))))
		if _, ok := c.Entity(1); ok || c.Stats().Resets != 1 {
			t.Fatalf("pre-reset packet applied, or %d resets", c.Stats().Resets)
		}
		// The history before the reset is gone: a delta against tick 10 fails.
		mustHandle(t, c, packet(t, 21, 3, 0, delta(2, 11, at(2), at(21))))
		if c.Stats().RecordsUnapplied != 1 {
			t.Fatal("delta against pre-reset history applied")
		}
	}
}

func TestHistoryDepth(t *testing.T) {
	c := New()
	mustHandle(t, c, packet(t, 1, 0, 0, spawn(1, at(1))))
	for tick := uint32(2); tick <= protocol.HistoryDepth+1; tick++ {
		mustHandle(t, c, packet(t, tick, uint16(tick), 0, delta(1, 1, at(int32(tick-1)), at(int32(tick)))))
	}
	// HistoryDepth states newer than tick 1 were received: tick 1 is evicted, tick 2 is not.
	mustHandle(t, c, packet(t, 40, 40, 0, delta(1, 40-2, at(2), at(40))))
	wantState(t, c, 1, at(40))
	mustHandle(t, c, packet(t, 41, 41, 0, delta(1, 40, at(1), at(41))))
	if c.Stats().RecordsUnapplied != 1 {
		t.Fatal("a delta against an evicted baseline applied")
	}
}

func TestAckWindow(t *testing.T) {
	tests := []struct {
		name     string
		seqs     []uint16
		latest   uint16
		received uint64
	}{
		{"in order", []uint16{1, 2, 3}, 3, 0b11},
		{"reordered", []uint16{3, 1, 2}, 3, 0b11},
		{"gap", []uint16{10, 12, 15}, 15, 1<<2 | 1<<4},
		{"wraps", []uint16{65534, 65535, 0, 1}, 1, 0b111},
		{"jump past the window", []uint16{1, 2, 100}, 100, 0},
		{"exactly the window", []uint16{1, 65}, 65, 1 << 63},
		{"too old", []uint16{100, 20}, 100, 0},
		{"duplicate", []uint16{5, 5}, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			if _, ok := c.AppendAck(nil); ok {
				t.Fatal("ACK before any packet")
			}
			for i, s := range tt.seqs {
				mustHandle(t, c, packet(t, uint32(i+1), s, 0))
			}
			if !c.AckDue() {
				t.Fatal("no ACK due")
			}
			b, _ := c.AppendAck(nil)
			var a protocol.Ack
			if err := protocol.DecodeAck(b, &a); err != nil {
				t.Fatal(err)
			}
			if a.Latest != tt.latest || a.Received != tt.received {
				t.Fatalf("latest %d received %b, want %d %b", a.Latest, a.Received, tt.latest, tt.received)
			}
			if c.AckDue() {
				t.Fatal("ACK still due after AppendAck")
			}
		})
	}
}

func TestMalformedAndUnexpected(t *testing.T) {
	c := New()
	good := packet(t, 10, 0, 0, spawn(1, at(1)))
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"truncated", good[:len(good)-2], protocol.ErrTruncated},
		{"empty", nil, protocol.ErrEmpty},
		{"ack from server", protocol.AppendAck(nil, &protocol.Ack{}), ErrUnexpected},
		{"bad reset", []byte{protocol.Version<<4 | byte(protocol.MsgReset)}, protocol.ErrTruncated},
	}
	for _, tt := range tests {
		if err := c.HandleMessage(tt.in, 0); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if st := c.Stats(); st.Malformed != uint64(len(tests)) || st.Packets != 0 || c.Len() != 0 {
		t.Fatalf("stats %+v, view %d", st, c.Len())
	}
}

func TestPingCommandAndAge(t *testing.T) {
	c := New()
	if err := c.HandleMessage(packet(t, 100, 0, 0), 100*16+40); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.LastAgeMs != 40 || st.MaxAgeMs != 40 || st.SumAgeMs != 40 {
		t.Fatalf("age stats %+v", st)
	}
	if !c.PingDue(1000) {
		t.Fatal("first ping not due")
	}
	var p protocol.Ping
	if err := protocol.DecodePing(c.AppendPing(nil, 1000), &p); err != nil || p.ClientTimeMs != 1000 || p.LastAppliedTick != 100 {
		t.Fatalf("ping %+v, %v", p, err)
	}
	if c.PingDue(1000+PingIntervalMs-1) || !c.PingDue(1000+PingIntervalMs) {
		t.Fatal("ping not due every PingIntervalMs")
	}
	var cmd protocol.Command
	for want := range uint16(3) {
		b, err := c.AppendCommand(nil, []byte("go"))
		if err != nil || protocol.DecodeCommand(b, &cmd) != nil || cmd.Seq != want || cmd.Tick != 100 {
			t.Fatalf("command %+v, %v", cmd, err)
		}
	}
	if _, err := c.AppendCommand(nil, make([]byte, protocol.MaxCommandPayload+1)); !errors.Is(err, protocol.ErrPayloadLimit) {
		t.Fatalf("oversized command: %v", err)
	}
	if b, _ := c.AppendCommand(nil, nil); protocol.DecodeCommand(b, &cmd) != nil || cmd.Seq != 3 {
		t.Fatal("a refused command consumed a sequence number")
	}
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	const n = 60
	c := New()
	var recs []rec
	for id := range uint16(n) {
		recs = append(recs, spawn(id, at(int32(id)+1)))
	}
	mustHandle(t, c, packet(t, 1, 0, 0, recs...))
	pkts := make([][]byte, 20)
	for i := range pkts {
		tick := int32(i + 2)
		var ds []rec
		for id := range int32(n) {
			ds = append(ds, delta(uint16(id), 1, at(id+tick-1), at(id+tick)))
		}
		pkts[i] = packet(t, uint32(tick), uint16(tick), 0, ds...)
	}
	ack := make([]byte, 0, 128)
	i := 0
	allocs := testing.AllocsPerRun(len(pkts)-1, func() {
		if err := c.HandleMessage(pkts[i], 0); err != nil {
			t.Fatal(err)
		}
		ack, _ = c.AppendAck(ack[:0])
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet, want 0", allocs)
	}
	if c.Stats().RecordsUnapplied != 0 {
		t.Fatal("deltas failed")
	}
}
