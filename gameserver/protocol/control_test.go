package protocol

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func sampleAck() *Ack {
	a := &Ack{Latest: 65530, Received: 0x8000_0000_0000_0005, LastAppliedTick: 123456, Resync: true}
	a.AddNeedFull(7)
	a.AddNeedFull(65535)
	return a
}

func ackEqual(a, b *Ack) bool {
	return a.Latest == b.Latest && a.Received == b.Received && a.LastAppliedTick == b.LastAppliedTick &&
		a.Resync == b.Resync && slices.Equal(a.NeedFull(), b.NeedFull())
}

func TestAckRoundTrip(t *testing.T) {
	full := &Ack{Latest: 1, Received: 1<<64 - 1, LastAppliedTick: 1<<32 - 1}
	for i := range MaxNeedFull {
		if !full.AddNeedFull(uint16(i * 1000)) {
			t.Fatalf("AddNeedFull refused id %d of %d", i, MaxNeedFull)
		}
	}
	if full.AddNeedFull(1) {
		t.Fatal("AddNeedFull accepted more than MaxNeedFull ids")
	}
	tests := []struct {
		name string
		ack  *Ack
	}{
		{"empty", &Ack{}},
		{"sample", sampleAck()},
		{"full", full},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendAck(nil, tt.ack)
			if want := 17 + 2*len(tt.ack.NeedFull()); len(b) != want {
				t.Fatalf("encoded %d bytes, want %d", len(b), want)
			}
			var got Ack
			got.AddNeedFull(99) // decoding must replace, not append
			if err := DecodeAck(b, &got); err != nil {
				t.Fatalf("DecodeAck: %v", err)
			}
			if !ackEqual(&got, tt.ack) {
				t.Fatalf("decoded %+v, want %+v", got, *tt.ack)
			}
		})
	}
}

func TestControlRoundTrips(t *testing.T) {
	ping := Ping{ClientTimeMs: 0xfedcba98, LastAppliedTick: 42}
	var gotPing Ping
	if err := DecodePing(AppendPing(nil, &ping), &gotPing); err != nil || gotPing != ping {
		t.Fatalf("ping: %+v, %v", gotPing, err)
	}
	reset := Reset{Tick: 0x01020304}
	var gotReset Reset
	if err := DecodeReset(AppendReset(nil, &reset), &gotReset); err != nil || gotReset != reset {
		t.Fatalf("reset: %+v, %v", gotReset, err)
	}
	for _, n := range []int{0, 1, MaxCommandPayload} {
		cmd := Command{Seq: 9, Tick: 77, Payload: bytes.Repeat([]byte{0xab}, n)}
		b, err := AppendCommand([]byte("prefix"), &cmd)
		if err != nil {
			t.Fatalf("AppendCommand(%d bytes): %v", n, err)
		}
		if string(b[:6]) != "prefix" {
			t.Fatal("AppendCommand overwrote dst")
		}
		var got Command
		if err := DecodeCommand(b[6:], &got); err != nil {
			t.Fatalf("DecodeCommand(%d bytes): %v", n, err)
		}
		if got.Seq != cmd.Seq || got.Tick != cmd.Tick || !bytes.Equal(got.Payload, cmd.Payload) {
			t.Fatalf("command: %+v, want %+v", got, cmd)
		}
	}
	if _, err := AppendCommand(nil, &Command{Payload: make([]byte, MaxCommandPayload+1)}); !errors.Is(err, ErrPayloadLimit) {
		t.Fatalf("oversized payload: %v", err)
	}
}

func TestControlDecodeErrors(t *testing.T) {
	ack := AppendAck(nil, sampleAck())
	ping := AppendPing(nil, &Ping{ClientTimeMs: 1, LastAppliedTick: 2})
	reset := AppendReset(nil, &Reset{Tick: 3})
	cmd, err := AppendCommand(nil, &Command{Seq: 1, Tick: 2, Payload: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(b []byte, f func([]byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	decoders := map[MsgType]func([]byte) error{
		MsgAck:     func(b []byte) error { var a Ack; return DecodeAck(b, &a) },
		MsgPing:    func(b []byte) error { var p Ping; return DecodePing(b, &p) },
		MsgReset:   func(b []byte) error { var r Reset; return DecodeReset(b, &r) },
		MsgCommand: func(b []byte) error { var c Command; return DecodeCommand(b, &c) },
	}
	tests := []struct {
		name string
		typ  MsgType
		in   []byte
		want error
	}{
		{"empty", MsgAck, nil, ErrEmpty},
		{"version", MsgPing, mutate(ping, func(b []byte) { b[0] = 2<<4 | byte(MsgPing) }), ErrVersion},
		{"type", MsgPing, ack, ErrType},
		{"zero type", MsgReset, []byte{Version << 4, 0, 0, 0, 0}, ErrType},
		{"ack truncated", MsgAck, ack[:len(ack)-1], ErrTruncated},
		{"ack trailing", MsgAck, append(bytes.Clone(ack), 0), ErrTrailing},
		{"ack flags", MsgAck, mutate(ack, func(b []byte) { b[15] |= 0x80 }), ErrInvalid},
		{"ack count", MsgAck, mutate(ack, func(b []byte) { b[16] = MaxNeedFull + 1 }), ErrTooMany},
		{"ping truncated", MsgPing, ping[:4], ErrTruncated},
		{"ping trailing", MsgPing, append(bytes.Clone(ping), 1), ErrTrailing},
		{"reset truncated", MsgReset, reset[:1], ErrTruncated},
		{"reset trailing", MsgReset, append(bytes.Clone(reset), 0), ErrTrailing},
		{"command header truncated", MsgCommand, cmd[:5], ErrTruncated},
		{"command payload truncated", MsgCommand, cmd[:len(cmd)-1], ErrTruncated},
		{"command trailing", MsgCommand, append(bytes.Clone(cmd), 0), ErrTrailing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := decoders[tt.typ](tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPeekType(t *testing.T) {
	for _, typ := range []MsgType{MsgSnapshot, MsgReset, MsgAck, MsgPing, MsgCommand} {
		got, err := PeekType([]byte{byte(typeByte(typ))})
		if err != nil || got != typ {
			t.Errorf("PeekType(%v) = %v, %v", typ, got, err)
		}
		if typ.String() == "UNKNOWN" {
			t.Errorf("%d has no name", typ)
		}
	}
	if MsgType(15).String() != "UNKNOWN" {
		t.Error("type 15 has a name")
	}
}

func TestControlEncodeAllocatesNothing(t *testing.T) {
	ack := sampleAck()
	cmd := &Command{Seq: 1, Payload: []byte("input")}
	buf := make([]byte, 0, 256)
	var decodedAck Ack
	var decodedCmd Command
	allocs := testing.AllocsPerRun(100, func() {
		b := AppendAck(buf[:0], ack)
		if DecodeAck(b, &decodedAck) != nil {
			t.Fatal("decode ack")
		}
		b = AppendPing(buf[:0], &Ping{})
		b = AppendReset(b, &Reset{})
		b, err := AppendCommand(b[:0], cmd)
		if err != nil || DecodeCommand(b, &decodedCmd) != nil {
			t.Fatal("command")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}
