package enet

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// receive services h until a packet arrives in ev.
func receive(tb testing.TB, h *Host, ev *Event) {
	deadline := time.Now().Add(testDeadline)
	for {
		ok, err := h.Service(ev, 5*time.Millisecond)
		if err != nil {
			tb.Fatal(err)
		}
		if ok && ev.Type == EventReceive {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no packet within %s", testDeadline)
		}
	}
}

func TestPacketLifetime(t *testing.T) {
	server, client := newServer(t), newClient(t, 1)
	_, clientEnd := connect(t, server, client, 1)
	want := []byte("snapshot 42")
	if err := clientEnd.Send(3, want, Reliable); err != nil {
		t.Fatal(err)
	}
	client.Flush()

	var ev Event
	receive(t, server, &ev)
	if ev.Channel != 3 || !bytes.Equal(ev.Packet.Bytes(), want) || ev.Packet.Len() != len(want) {
		t.Fatalf("got %q (len %d) on channel %d", ev.Packet.Bytes(), ev.Packet.Len(), ev.Channel)
	}
	short := make([]byte, 4)
	if n := ev.Packet.CopyTo(short); n != 4 || string(short) != "snap" {
		t.Errorf("CopyTo into 4 bytes: %d, %q", n, short)
	}
	kept := make([]byte, 64)
	kept = kept[:ev.Packet.CopyTo(kept)]

	ev.Packet.Destroy()
	ev.Packet.Destroy() // a second Destroy is a no-op, not a double free
	if ev.Packet.Bytes() != nil || ev.Packet.Len() != 0 || ev.Packet.CopyTo(short) != 0 {
		t.Error("destroyed packet still exposes data")
	}
	if !bytes.Equal(kept, want) {
		t.Errorf("copied bytes %q changed after Destroy", kept)
	}

	// A packet left in the Event is destroyed by the next Service: a loop that
	// never calls Destroy must not grow the C heap.
	payload := make([]byte, 512)
	cycle := func() {
		if err := clientEnd.Send(0, payload, Reliable); err != nil {
			t.Fatal(err)
		}
		client.Flush()
		receive(t, server, &ev)
		if _, err := client.Service(&Event{}, 0); err != nil { // take the ack
			t.Fatal(err)
		}
	}
	for range 100 {
		cycle()
	}
	before := CHeapBytes()
	for range 2000 {
		cycle()
	}
	ev.Packet.Destroy()
	if grown := int64(CHeapBytes()) - int64(before); grown > 64<<10 {
		t.Errorf("C heap grew %d bytes over 2000 packets never explicitly destroyed", grown)
	}
}

// memory returns the C heap in use and the process's resident set, after
// returning what Go can to the OS.
func memory(t *testing.T) (cHeap, rss int64) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(statm))
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(CHeapBytes()), pages * int64(os.Getpagesize())
}

func TestCreateDestroyDoesNotLeak(t *testing.T) {
	limited := Config{Address: loopback, Peers: 64, Channels: 4, ConnectRate: ConnectRate{PerSecond: 100, Burst: 10}}
	hostCycle := func() {
		server := newTestHostNoCleanup(t, limited)
		client := newTestHostNoCleanup(t, Config{Peers: 4, Channels: 2})
		if _, err := client.Connect(server.Address(), 2, 0); err != nil {
			t.Fatal(err)
		}
		client.Flush() // a CONNECT left unanswered in the server's socket
		server.Destroy()
		client.Destroy()
		server.Destroy()
	}
	// Each connection cycle runs the limiter (allocating its table), the
	// handshake, one packet each way and the disconnect.
	connCycle := func() {
		server := newTestHostNoCleanup(t, limited)
		client := newTestHostNoCleanup(t, Config{Peers: 1, Channels: 2})
		serverEnd, clientEnd := connect(t, server, client, 9)
		if err := clientEnd.Send(1, make([]byte, 700), Reliable); err != nil {
			t.Fatal(err)
		}
		if err := serverEnd.Send(0, make([]byte, 3000), Reliable); err != nil {
			t.Fatal(err)
		}
		client.Flush()
		server.Flush()
		var ev Event
		receive(t, server, &ev)
		receive(t, client, &ev) // destroys the server's packet still in ev
		ev.Packet.Destroy()
		clientEnd.Disconnect(4001)
		down := 0
		l := loop{hosts: []*Host{server, client}, onEvent: func(_ *Host, ev *Event) {
			if ev.Type == EventDisconnect {
				down++
			}
		}}
		l.until(t, "disconnect", func() bool { return down == 2 })
		server.Destroy()
		client.Destroy()
	}

	for range 50 {
		hostCycle()
		connCycle()
	}
	heap0, rss0 := memory(t)
	for range 2000 {
		hostCycle()
	}
	for range 200 {
		connCycle()
	}
	heap1, rss1 := memory(t)
	t.Logf("C heap %d -> %d bytes, RSS %d -> %d KiB", heap0, heap1, rss0>>10, rss1>>10)
	// One leaked host is over 11 KiB of C heap, one leaked limiter table 96 KiB.
	if grown := heap1 - heap0; grown > 64<<10 {
		t.Errorf("C heap grew %d bytes over 2000 host and 200 connection cycles", grown)
	}
	if grown := rss1 - rss0; grown > 16<<20 {
		t.Errorf("RSS grew %d KiB over 2000 host and 200 connection cycles", grown>>10)
	}
}

func newTestHostNoCleanup(t *testing.T, cfg Config) *Host {
	t.Helper()
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestWarmPathAllocatesNothing(t *testing.T) {
	server, client := newServer(t), newClient(t, 1)
	_, clientEnd := connect(t, server, client, 1)
	request := make([]byte, 96)
	buf := make([]byte, 1500)
	var sev, cev Event
	roundTrip := func() {
		if err := clientEnd.Send(0, request, Reliable); err != nil {
			t.Fatal(err)
		}
		client.Flush()
		receive(t, server, &sev)
		n := sev.Packet.CopyTo(buf)
		sev.Packet.Destroy()
		if err := sev.Peer.Send(1, buf[:n], Reliable); err != nil {
			t.Fatal(err)
		}
		server.Flush()
		receive(t, client, &cev)
		_ = cev.Packet.Bytes()
		cev.Packet.Destroy()
	}
	for range 50 {
		roundTrip()
	}
	if allocs := testing.AllocsPerRun(500, roundTrip); allocs != 0 {
		t.Errorf("warm send/service/receive round trip allocates %v times", allocs)
	}

	var stats LinkStats
	if allocs := testing.AllocsPerRun(1000, func() { stats = clientEnd.LinkStats() }); allocs != 0 {
		t.Errorf("LinkStats allocates %v times", allocs)
	}
	if stats.RTT <= 0 {
		t.Errorf("RTT %s after 550 round trips", stats.RTT)
	}
	if allocs := testing.AllocsPerRun(1000, func() { _ = server.Totals() }); allocs != 0 {
		t.Errorf("Totals allocates %v times", allocs)
	}
}
