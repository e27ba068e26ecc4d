package botswarm

import (
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// testDeadline bounds every wait on the network: a hang guard for a loaded 2-core machine,
// not a speed assertion.
const testDeadline = 30 * time.Second

// sourceConfig shapes a source's traffic.
type sourceConfig struct {
	hz              int           // frames per second to every connected peer
	packetsPerFrame int           // SNAPSHOT packets per frame
	records         int           // spawn records per packet
	sendFor         time.Duration // each peer is sent frames this long after it connects; 0: until it leaves
	closeAfter      int           // close a peer with closeCode after this many frames; 0: never
	closeCode       uint32
	connectRate     enet.ConnectRate
	peers           int // peer slots; 256 if 0
	// layout is the schema the records follow and the peers' HELLO must name; nil: the schema
	// of a game that declares none.
	layout *protocol.Layout
}

// source is a minimal game server for testing the harness: it accepts ENet peers, sends each
// one frames of spawn-only SNAPSHOT packets at a fixed rate, and counts what the peers send.
type source struct {
	cfg  sourceConfig
	host *enet.Host
	done chan struct{}
	stop chan struct{}

	mu    sync.Mutex
	peers map[enet.Peer]*sourcePeer
	gone  []*sourcePeer
	cpu   time.Duration // the source thread's CPU time, once it stopped
}

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

// sourcePeer is what a source sent one peer and received from it.
type sourcePeer struct {
	connectedAt time.Time
	seq         uint16
	frames      int
	packets     int
	bytes       int
	frameTimes  []time.Time
	hellos      int // HELLOs naming the source's schema
	acks        int
	lastAcked   uint16
	pings       int
	commands    int
	cmdSizes    map[int]int // COMMAND payload sizes seen
	bad         int
	closed      bool
}

func startSource(tb testing.TB, cfg sourceConfig) *source {
	tb.Helper()
	peers := cfg.peers
	if peers == 0 {
		peers = 256
	}
	h, err := enet.NewHost(enet.Config{
		Address:     netip.MustParseAddrPort("127.0.0.1:0"),
		Peers:       peers,
		Channels:    channelCount,
		ConnectRate: cfg.connectRate,
	})
	if err != nil {
		tb.Fatal(err)
	}
	s := &source{cfg: cfg, host: h, done: make(chan struct{}), stop: make(chan struct{}), peers: map[enet.Peer]*sourcePeer{}}
	go s.run()
	tb.Cleanup(s.close)
	return s
}

func (s *source) addr() netip.AddrPort { return s.host.Address() }

func (s *source) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.host.Destroy()
}

// all returns every peer the source saw, connected or gone, in connect order.
func (s *source) all() []sourcePeer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sourcePeer
	for _, p := range s.gone {
		out = append(out, *p)
	}
	for _, p := range s.peers {
		out = append(out, *p)
	}
	return out
}

func (s *source) run() {
	defer close(s.done)
	// The source keeps its own thread so benchmarks can tell its CPU time from the bots'.
	runtime.LockOSThread()
	defer func() {
		var ru syscall.Rusage
		if syscall.Getrusage(rusageThread, &ru) == nil {
			s.mu.Lock()
			s.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			s.mu.Unlock()
		}
	}()
	var ev enet.Event
	defer ev.Packet.Destroy()
	var tick uint32
	interval := time.Second
	if s.cfg.hz > 0 {
		interval = time.Second / time.Duration(s.cfg.hz)
	}
	next := time.Now()
	if s.cfg.hz == 0 {
		next = next.Add(time.Hour) // no frames: wait on the socket only
	}
	buf := make([]byte, 1200)
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		ok, err := s.host.Service(&ev, min(max(time.Until(next), 0), 5*time.Millisecond))
		for ; ok && err == nil; ok, err = s.host.Service(&ev, 0) {
			s.event(&ev)
		}
		if err != nil {
			panic(err)
		}
		if now := time.Now(); s.cfg.hz > 0 && !now.Before(next) {
			tick++
			s.frame(tick, now, buf)
			next = next.Add(interval)
			if next.Before(now) {
				next = now.Add(interval)
			}
			s.host.Flush()
		}
	}
}

func (s *source) event(ev *enet.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case enet.EventConnect:
		// ENet's own unreliable throttle would drop frames at the sender when a loaded machine
		// makes RTT jitter; like the game server, the source pins it open, so every frame sent
		// on loopback arrives.
		ev.Peer.ConfigureThrottle(5*time.Second, 2, 0)
		s.peers[ev.Peer] = &sourcePeer{connectedAt: time.Now(), cmdSizes: map[int]int{}}
	case enet.EventDisconnect:
		if p := s.peers[ev.Peer]; p != nil {
			p.closed = true
			s.gone = append(s.gone, p)
			delete(s.peers, ev.Peer)
		}
	case enet.EventReceive:
		p := s.peers[ev.Peer]
		if p == nil {
			return
		}
		b := ev.Packet.Bytes()
		typ, err := protocol.PeekType(b)
		if err != nil {
			p.bad++
			return
		}
		switch typ {
		case protocol.MsgHello:
			var h protocol.Hello
			if protocol.DecodeHello(b, &h) != nil || h.SchemaHash != s.schemaHash() {
				p.bad++
				return
			}
			p.hellos++
		case protocol.MsgAck:
			var a protocol.Ack
			if protocol.DecodeAck(b, &a) != nil {
				p.bad++
				return
			}
			p.acks++
			p.lastAcked = a.Latest
		case protocol.MsgPing:
			var pg protocol.Ping
			if protocol.DecodePing(b, &pg) != nil {
				p.bad++
				return
			}
			p.pings++
		case protocol.MsgCommand:
			var c protocol.Command
			if protocol.DecodeCommand(b, &c) != nil {
				p.bad++
				return
			}
			p.commands++
			p.cmdSizes[len(c.Payload)]++
		default:
			p.bad++
		}
	case enet.EventNone:
	}
}

// frame sends one frame to every peer still due one.
func (s *source) frame(tick uint32, now time.Time, buf []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for peer, p := range s.peers {
		if p.closed || s.cfg.sendFor > 0 && now.Sub(p.connectedAt) >= s.cfg.sendFor {
			continue
		}
		for i := range s.cfg.packetsPerFrame {
			pkt := buildPacket(buf, s.cfg.layout, tick, now, p.seq, i, s.cfg.records)
			if i == s.cfg.packetsPerFrame-1 {
				protocol.SetSnapshotFlags(pkt, protocol.FlagLast)
			}
			if err := peer.Send(channelData, pkt, enet.Unreliable); err != nil {
				panic(err)
			}
			p.seq++
			p.packets++
			p.bytes += len(pkt)
		}
		p.frames++
		p.frameTimes = append(p.frameTimes, now)
		if s.cfg.closeAfter > 0 && p.frames == s.cfg.closeAfter {
			peer.DisconnectLater(s.cfg.closeCode)
			p.closed = true
		}
	}
}

// schemaHash is the hash of the source's schema.
func (s *source) schemaHash() uint64 {
	if s.cfg.layout == nil {
		return protocol.TransformSchema().Hash()
	}
	return s.cfg.layout.Hash()
}

// buildPacket encodes a SNAPSHOT of tick carrying spawns of kind 1 of entities part*records
// onwards, with fields of the tick's value if the layout gives kind 1 fields.
func buildPacket(buf []byte, l *protocol.Layout, tick uint32, now time.Time, seq uint16, part, records int) []byte {
	var e protocol.SnapshotEncoder
	e.SetLayout(l)
	var fields []uint32
	if k := l.Kind(1); k != nil {
		fields = make([]uint32, l.Stride())
		for i := range k.Fields {
			fields[k.Fields[i].Word] = tick & (1<<min(k.Fields[i].Width, 31) - 1)
		}
	}
	h := protocol.SnapshotHeader{Tick: tick, ServerTimeMs: uint32(now.UnixMilli()), Seq: seq}
	if !e.Begin(buf, &h) {
		panic("buffer too small")
	}
	for r := range records {
		id := uint16(part*records + r)
		st := protocol.State{Pos: [3]int32{int32(tick), int32(id), 0}, Rot: protocol.YawRotation(float64(tick) / 10)}
		if !e.Spawn(id, 1, &st, fields) {
			panic("packet full")
		}
	}
	return e.Finish()
}
