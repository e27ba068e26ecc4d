package linkem

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Test packets carry a sequence number and the sender's wall clock, stamped just before the send;
// the receiver takes the kernel's receive timestamp on the same clock, so one-way delay is
// measured without the receiving goroutine's scheduling delay.
const headerSize = 12

func nowNs() int64 { return time.Now().UnixNano() }

type arrival struct {
	seq   uint32
	delay time.Duration
	from  netip.AddrPort
	at    int64
	size  int
}

// endpoint is a loopback UDP socket that records every datagram it receives; with echo it sends
// each one back to its source re-stamped with the echo time, so the echo measures only the return
// direction.
type endpoint struct {
	conn *net.UDPConn
	echo bool

	mu  sync.Mutex
	got []arrival
}

func newEndpoint(t *testing.T, echo bool) *endpoint {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	if err := enableRxStamps(conn); err != nil {
		t.Fatal(err)
	}
	e := &endpoint{conn: conn, echo: echo}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf, oob := make([]byte, maxDatagram), make([]byte, rxOOBSize)
		for {
			n, oobn, _, from, err := conn.ReadMsgUDPAddrPort(buf, oob)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			now, ok := rxStamp(oob[:oobn])
			if !ok {
				now = nowNs()
			}
			if n < headerSize {
				continue
			}
			a := arrival{
				seq:   binary.LittleEndian.Uint32(buf),
				delay: time.Duration(now - int64(binary.LittleEndian.Uint64(buf[4:]))),
				from:  from,
				at:    now,
				size:  n,
			}
			e.mu.Lock()
			e.got = append(e.got, a)
			e.mu.Unlock()
			if echo {
				binary.LittleEndian.PutUint64(buf[4:], uint64(nowNs()))
				if _, err := conn.WriteToUDPAddrPort(buf[:n], from); err != nil && errors.Is(err, net.ErrClosed) {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Error(err)
		}
		<-done
	})
	return e
}

func (e *endpoint) addr() netip.AddrPort { return e.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (e *endpoint) send(t *testing.T, to netip.AddrPort, seq uint32, size int) {
	t.Helper()
	buf := make([]byte, max(size, headerSize))
	binary.LittleEndian.PutUint32(buf, seq)
	binary.LittleEndian.PutUint64(buf[4:], uint64(nowNs()))
	if _, err := e.conn.WriteToUDPAddrPort(buf, to); err != nil {
		t.Fatal(err)
	}
}

// sendPaced sends sequence numbers first..first+n-1 in bursts of burst packets every gap.
func (e *endpoint) sendPaced(t *testing.T, to netip.AddrPort, first uint32, n, size, burst int, gap time.Duration) {
	t.Helper()
	next := time.Now()
	for i := range n {
		e.send(t, to, first+uint32(i), size)
		if (i+1)%burst == 0 {
			next = next.Add(gap)
			time.Sleep(time.Until(next))
		}
	}
}

func (e *endpoint) arrivals() []arrival {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func (e *endpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

func (e *endpoint) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = nil
}

// eventually polls cond every few milliseconds until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startProxy starts a proxy in front of server and closes it at cleanup. It asks for realtime
// release where the test may have it (root), so a loaded machine disturbs the timing less.
func startProxy(t *testing.T, server *endpoint, cfg Config) *Proxy {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream = server.addr().String()
	cfg.Realtime = true
	p, err := New(cfg)
	if err != nil && strings.Contains(err.Error(), "realtime priority") {
		t.Logf("releasing at normal priority: %v", err)
		cfg.Realtime = false
		p, err = New(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func clientStats(p *Proxy, index int) (ClientStats, bool) {
	for _, c := range p.Stats().Clients {
		if c.Index == index {
			return c, true
		}
	}
	return ClientStats{}, false
}

// settle waits until the proxy has taken in want packets in direction d of client index, has
// nothing left in flight, and receiver holds every packet the proxy sent.
//
// A Stats snapshot reads the bytes in flight before the clients' counters, and the proxy counts
// a packet in a moment before it counts its bytes in flight, so one snapshot can show every
// packet in, nothing in flight and not the last packets out. The relay is done when, after every
// packet is in, two snapshots in a row (5 ms apart) show nothing in flight and the same count of
// packets out as the snapshot before them.
func settle(t *testing.T, p *Proxy, index int, d direction, want uint64, receiver *endpoint) DirStats {
	t.Helper()
	var ds DirStats
	allIn, idle, out := false, 0, uint64(0)
	eventually(t, 20*time.Second, "the proxy to relay every packet", func() bool {
		st := p.Stats()
		i := slices.IndexFunc(st.Clients, func(c ClientStats) bool { return c.Index == index })
		if i < 0 {
			return false
		}
		ds = st.Clients[i].Down
		if d == upstream {
			ds = st.Clients[i].Up
		}
		if !allIn {
			allIn = ds.PacketsIn == want
			return false
		}
		if st.BufferedBytes != 0 || ds.PacketsOut != out {
			idle, out = 0, ds.PacketsOut
			return false
		}
		idle++
		return idle >= 2 && uint64(receiver.count()) >= ds.PacketsOut
	})
	if got := uint64(receiver.count()); got != ds.PacketsOut {
		t.Fatalf("receiver got %d packets, proxy sent %d: the kernel dropped some", got, ds.PacketsOut)
	}
	return ds
}

// quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(math.Round(q*float64(len(sorted)-1)))]
}

func delaysOf(as []arrival) []time.Duration {
	d := make([]time.Duration, len(as))
	for i, a := range as {
		d[i] = a.delay
	}
	slices.Sort(d)
	return d
}
