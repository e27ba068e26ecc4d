package linkem

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config defaults.
const (
	DefaultIdleTimeout      = 60 * time.Second
	DefaultMaxClients       = 1024
	DefaultMaxBufferedBytes = 64 << 20
	DefaultSocketBuffer     = 4 << 20
)

const (
	maxDatagram = 65535
	// poolBufSize covers an ENet MTU-sized datagram; larger ones get their own buffer.
	poolBufSize = 2048
)

// ErrNoOverride is returned by ResetProfile when no override was set for the selector.
var ErrNoOverride = errors.New("no override set for this selector")

// Config configures a Proxy. Listen and Upstream are required.
type Config struct {
	// Listen is the UDP address clients send to, e.g. "127.0.0.1:0".
	Listen string
	// Upstream is the game server's UDP address.
	Upstream string
	// Seed seeds every random decision (see the package comment).
	Seed uint64
	// Default is the profile of clients that no rule or override picks.
	Default Profile
	// Schedule holds the starting classes, the rules that assign clients to them, and timed
	// profile changes counted from New.
	Schedule Schedule
	// ControlAddr, if set, is a loopback TCP address for the HTTP control endpoint
	// (see ControlHandler); "127.0.0.1:0" picks a free port.
	ControlAddr string
	// IdleTimeout expires a client mapping with no packets in either direction and none in
	// flight; DefaultIdleTimeout if 0. A client that comes back gets a new index and socket.
	IdleTimeout time.Duration
	// MaxClients bounds concurrent mappings (and the expired ones kept for Stats);
	// DefaultMaxClients if 0.
	MaxClients int
	// MaxBufferedBytes bounds the memory of packets waiting to leave; packets beyond it are
	// dropped and counted as DroppedLimit. DefaultMaxBufferedBytes if 0.
	MaxBufferedBytes int64
	// SocketBuffer is the kernel send and receive buffer of every socket, so bursts are not
	// lost before the model sees them; DefaultSocketBuffer if 0.
	SocketBuffer int
	// Realtime runs the release thread at SCHED_FIFO priority 1 (Linux; root or CAP_SYS_NICE),
	// so that on a loaded machine packets still leave within about 100 µs of their time rather
	// than whole scheduler slices late; New fails if that is not allowed. The thread sleeps
	// between releases and spins at most 200 µs before one.
	Realtime bool
	// Logger receives mapping and profile events; nil discards them.
	Logger *slog.Logger
}

// Proxy is a running link emulator. Its methods are safe for concurrent use.
type Proxy struct {
	cfg      Config
	log      *slog.Logger
	start    time.Time
	conn     *net.UDPConn
	upstream *net.UDPAddr
	sched    *scheduler
	ctl      *http.Server
	ctlAddr  string
	bufPool  sync.Pool

	mu        sync.RWMutex
	closed    bool
	clients   map[netip.AddrPort]*client
	nextIndex int
	expired   []ClientStats
	profiles  Profiles

	buffered atomic.Int64
	refused  atomic.Uint64

	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// client is one client's mapping: its upstream socket and the model of each direction.
type client struct {
	index    int
	addr     netip.AddrPort
	up       *net.UDPConn
	links    [2]lockedLink
	lastSeen atomic.Int64
	inflight atomic.Int64
	source   string // what chose the profile; guarded by Proxy.mu
}

type lockedLink struct {
	mu sync.Mutex
	l  *link
}

// New validates cfg, binds the sockets and starts relaying.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg:      cfg,
		log:      cfg.Logger,
		clients:  make(map[netip.AddrPort]*client),
		profiles: newProfiles(cfg.Default, cfg.Schedule),
		done:     make(chan struct{}),
	}
	p.bufPool.New = func() any {
		b := make([]byte, poolBufSize)
		return &b
	}
	var err error
	if p.upstream, err = net.ResolveUDPAddr("udp", cfg.Upstream); err != nil {
		return nil, fmt.Errorf("linkem: upstream %q: %w", cfg.Upstream, err)
	}
	laddr, err := net.ResolveUDPAddr("udp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("linkem: listen %q: %w", cfg.Listen, err)
	}
	if p.conn, err = net.ListenUDP("udp", laddr); err != nil {
		return nil, fmt.Errorf("linkem: listen: %w", err)
	}
	if err := p.setBuffers(p.conn); err != nil {
		return nil, errors.Join(err, p.conn.Close())
	}
	var ctlLn net.Listener
	if cfg.ControlAddr != "" {
		if ctlLn, err = listenLoopback(cfg.ControlAddr); err != nil {
			return nil, errors.Join(err, p.conn.Close())
		}
		p.ctlAddr = ctlLn.Addr().String()
	}
	p.start = time.Now()
	if p.sched, err = newScheduler(p.clock, p.deliver, p.release, cfg.Realtime); err != nil {
		return nil, errors.Join(fmt.Errorf("linkem: %w", err), p.conn.Close(), closeListener(ctlLn))
	}
	// Steps at 0 are in force from the start: they apply before the first packet is read.
	steps := cfg.Schedule.sortedSteps()
	for len(steps) > 0 && steps[0].At <= 0 {
		p.applyStep(steps[0])
		steps = steps[1:]
	}
	p.wg.Add(3)
	go p.readClients()
	go p.expireLoop()
	go p.runSchedule(steps)
	if ctlLn != nil {
		p.ctl = &http.Server{Handler: p.ControlHandler(), ReadHeaderTimeout: 5 * time.Second}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if err := p.ctl.Serve(ctlLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.log.Error("control endpoint stopped", "err", err)
			}
		}()
	}
	return p, nil
}

func closeListener(ln net.Listener) error {
	if ln == nil {
		return nil
	}
	return ln.Close()
}

func (cfg *Config) setDefaults() error {
	if cfg.Listen == "" {
		return errors.New("linkem: Listen is required")
	}
	if cfg.Upstream == "" {
		return errors.New("linkem: Upstream is required")
	}
	if err := cfg.Default.Validate(); err != nil {
		return fmt.Errorf("linkem: default profile: %w", err)
	}
	if err := cfg.Schedule.Validate(); err != nil {
		return fmt.Errorf("linkem: %w", err)
	}
	if cfg.IdleTimeout < 0 || cfg.MaxClients < 0 || cfg.MaxBufferedBytes < 0 || cfg.SocketBuffer < 0 {
		return errors.New("linkem: IdleTimeout, MaxClients, MaxBufferedBytes and SocketBuffer must not be negative")
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.SocketBuffer == 0 {
		cfg.SocketBuffer = DefaultSocketBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// listenLoopback listens on addr and refuses anything but a loopback address: the control
// endpoint has no authentication.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("linkem: control address %q: %w", addr, err)
	}
	if ip, perr := netip.ParseAddr(host); host != "localhost" && (perr != nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("linkem: control address %q: must be a loopback IP or localhost", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("linkem: control: %w", err)
	}
	if ap, perr := netip.ParseAddrPort(ln.Addr().String()); perr != nil || !ap.Addr().IsLoopback() {
		return nil, errors.Join(fmt.Errorf("linkem: control address %q resolved to non-loopback %s", addr, ln.Addr()), ln.Close())
	}
	return ln, nil
}

// setBuffers sizes c's kernel buffers and turns on its receive timestamps.
func (p *Proxy) setBuffers(c *net.UDPConn) error {
	if err := enableRxStamps(c); err != nil {
		return fmt.Errorf("linkem: %w", err)
	}
	if err := c.SetReadBuffer(p.cfg.SocketBuffer); err != nil {
		return fmt.Errorf("linkem: read buffer: %w", err)
	}
	if err := c.SetWriteBuffer(p.cfg.SocketBuffer); err != nil {
		return fmt.Errorf("linkem: write buffer: %w", err)
	}
	return nil
}

// clock is the proxy's monotonic time in nanoseconds since New.
func (p *Proxy) clock() int64 { return int64(time.Since(p.start)) }

// arrival converts a datagram's kernel receive timestamp in oob to the proxy clock; without one,
// the datagram arrived now. The stamp is wall-clock time, so its age is taken against the wall
// clock and subtracted from the monotonic clock, clamped to [0, 1 s] in case the wall clock
// stepped.
func (p *Proxy) arrival(oob []byte) int64 {
	now := time.Now()
	mono := int64(now.Sub(p.start))
	stamp, ok := rxStamp(oob)
	if !ok {
		return mono
	}
	age := min(max(now.UnixNano()-stamp, 0), int64(time.Second))
	return mono - age
}

// Addr is the address clients send to.
func (p *Proxy) Addr() netip.AddrPort { return p.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// ControlAddr is the control endpoint's address, or "" when Config.ControlAddr was empty.
func (p *Proxy) ControlAddr() string { return p.ctlAddr }

// SetProfile sets prof for what sel picks (see Selector and Profiles) and applies it at once to
// every client it reaches; queues and ordering carry over.
func (p *Proxy) SetProfile(sel Selector, prof Profile) error {
	if err := sel.validate(); err != nil {
		return fmt.Errorf("linkem: %w", err)
	}
	if err := prof.Validate(); err != nil {
		return fmt.Errorf("linkem: profile for %s: %w", sel, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.profiles.set(sel, prof.WithDefaults())
	p.reapplyLocked()
	p.log.Info("profile set", "select", sel.String())
	return nil
}

// ResetProfile removes the override set for exactly sel (a client or address selector), so the
// clients it picked fall back to their rule's class or the default.
func (p *Proxy) ResetProfile(sel Selector) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.profiles.reset(sel); err != nil {
		return fmt.Errorf("linkem: %w", err)
	}
	p.reapplyLocked()
	p.log.Info("profile reset", "select", sel.String())
	return nil
}

// Profiles returns a copy of the profile state.
func (p *Proxy) Profiles() Profiles {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.profiles.clone()
}

func (p *Proxy) reapplyLocked() {
	for _, c := range p.clients {
		p.applyLocked(c)
	}
}

// applyLocked gives c the profile the current state resolves for it; p.mu held.
func (p *Proxy) applyLocked(c *client) {
	prof, source := p.profiles.resolve(c.index, c.addr)
	c.source = source
	for d, imp := range [2]Impairment{upstream: prof.Up, downstream: prof.Down} {
		ll := &c.links[d]
		ll.mu.Lock()
		ll.l.setImpairment(imp)
		ll.mu.Unlock()
	}
}

// Stats returns a snapshot of every client's counters and the release precision.
func (p *Proxy) Stats() Stats {
	p.mu.RLock()
	st := Stats{
		Uptime:         time.Since(p.start),
		Clients:        slices.Clone(p.expired),
		RefusedPackets: p.refused.Load(),
		BufferedBytes:  p.buffered.Load(),
	}
	for _, c := range p.clients {
		st.Clients = append(st.Clients, c.stats(true))
	}
	p.mu.RUnlock()
	slices.SortFunc(st.Clients, func(a, b ClientStats) int { return a.Index - b.Index })
	st.Release = p.sched.lateness()
	return st
}

// stats snapshots c; Proxy.mu held (for c.source).
func (c *client) stats(active bool) ClientStats {
	cs := ClientStats{Index: c.index, Addr: c.addr, Active: active, Source: c.source}
	if la, ok := c.up.LocalAddr().(*net.UDPAddr); ok {
		cs.Upstream = la.AddrPort()
	}
	for d := range c.links {
		ll := &c.links[d]
		ll.mu.Lock()
		ds := ll.l.stats()
		imp := ll.l.imp
		ll.mu.Unlock()
		if direction(d) == upstream {
			cs.Up, cs.Profile.Up = ds, imp
		} else {
			cs.Down, cs.Profile.Down = ds, imp
		}
	}
	return cs
}

// Close stops relaying, discards packets still waiting and releases every socket.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		close(p.done)
		errs := []error{p.conn.Close()}
		if p.ctl != nil {
			errs = append(errs, p.ctl.Close())
		}
		p.mu.Lock()
		p.closed = true // no mapping is created after this
		for _, c := range p.clients {
			errs = append(errs, c.up.Close())
		}
		p.mu.Unlock()
		p.wg.Wait()
		errs = append(errs, p.sched.close())
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// readClients relays datagrams from clients upstream, creating a mapping for each new source.
func (p *Proxy) readClients() {
	defer p.wg.Done()
	buf, oob := make([]byte, maxDatagram), make([]byte, rxOOBSize)
	for {
		n, oobn, _, src, err := p.conn.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP errors surfacing on the socket; the next read is independent
		}
		at := p.arrival(oob[:oobn])
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		c := p.lookup(src, at)
		if c == nil {
			p.refused.Add(1)
			continue
		}
		p.ingress(c, upstream, buf[:n], at)
	}
}

// lookup returns src's mapping, creating it on first sight; nil if refused. lastSeen is
// refreshed under the lock, so expiry (which takes the write lock) never closes a mapping that a
// packet has just been routed to.
func (p *Proxy) lookup(src netip.AddrPort, now int64) *client {
	p.mu.RLock()
	c := p.clients[src]
	if c != nil {
		c.lastSeen.Store(now)
	}
	p.mu.RUnlock()
	if c != nil {
		return c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.clients) >= p.cfg.MaxClients {
		return nil
	}
	up, err := net.DialUDP("udp", nil, p.upstream)
	if err == nil {
		if err = p.setBuffers(up); err != nil {
			err = errors.Join(err, up.Close())
		}
	}
	if err != nil {
		p.log.Error("upstream socket", "client", src.String(), "err", err)
		return nil
	}
	c = &client{index: p.nextIndex, addr: src, up: up}
	p.nextIndex++
	for d := range c.links {
		c.links[d].l = newLink(p.cfg.Seed, c.index, direction(d))
	}
	c.lastSeen.Store(now)
	p.applyLocked(c)
	p.clients[src] = c
	p.log.Info("client mapped", "index", c.index, "client", src.String(), "upstream", up.LocalAddr().String(), "profile", c.source)
	p.wg.Add(1)
	go p.readServer(c)
	return c
}

// readServer relays datagrams from the server to client c until c's socket closes.
func (p *Proxy) readServer(c *client) {
	defer p.wg.Done()
	buf, oob := make([]byte, maxDatagram), make([]byte, rxOOBSize)
	for {
		n, oobn, _, _, err := c.up.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // ECONNREFUSED while the server is not listening yet, and the like
		}
		at := p.arrival(oob[:oobn])
		c.lastSeen.Store(at)
		p.ingress(c, downstream, buf[:n], at)
	}
}

// ingress runs one datagram that arrived at now through c's model for direction d and queues the
// copies it lets through.
func (p *Proxy) ingress(c *client, d direction, data []byte, now int64) {
	ll := &c.links[d]
	charge := int64(max(len(data), poolBufSize))
	if p.buffered.Load()+2*charge > p.cfg.MaxBufferedBytes {
		ll.mu.Lock()
		ll.l.c.packetsIn++
		ll.l.c.bytesIn += uint64(len(data))
		ll.l.c.droppedLimit++
		ll.mu.Unlock()
		return
	}
	ll.mu.Lock()
	deps, n := ll.l.admit(now, len(data))
	ll.mu.Unlock()
	for _, at := range deps[:n] {
		buf := p.getBuf(len(data))
		copy(*buf, data)
		p.buffered.Add(charge)
		c.inflight.Add(1)
		if !p.sched.push(packet{at: at, buf: buf, n: len(data), c: c, dir: d}) {
			p.release(&packet{buf: buf, c: c})
		}
	}
}

func (p *Proxy) getBuf(n int) *[]byte {
	if n > poolBufSize {
		b := make([]byte, n)
		return &b
	}
	b := p.bufPool.Get().(*[]byte)
	*b = (*b)[:n]
	return b
}

// release returns a packet's buffer and its accounting.
func (p *Proxy) release(pk *packet) {
	b := pk.buf
	p.buffered.Add(-int64(max(cap(*b), poolBufSize)))
	pk.c.inflight.Add(-1)
	if cap(*b) == poolBufSize {
		*b = (*b)[:poolBufSize]
		p.bufPool.Put(b)
	}
	pk.buf = nil
}

// deliver sends a due packet; it runs on the scheduler goroutine.
func (p *Proxy) deliver(pk *packet) {
	data := (*pk.buf)[:pk.n]
	var err error
	if pk.dir == upstream {
		_, err = pk.c.up.Write(data)
	} else {
		_, err = p.conn.WriteToUDPAddrPort(data, pk.c.addr)
	}
	ll := &pk.c.links[pk.dir]
	ll.mu.Lock()
	if err != nil {
		ll.l.c.sendErrors++
	} else {
		ll.l.c.packetsOut++
		ll.l.c.bytesOut += uint64(pk.n)
	}
	ll.mu.Unlock()
	p.release(pk)
}

// expireLoop closes mappings idle for IdleTimeout.
func (p *Proxy) expireLoop() {
	defer p.wg.Done()
	t := time.NewTicker(min(p.cfg.IdleTimeout/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.expire()
		}
	}
}

func (p *Proxy) expire() {
	now := p.clock()
	idle := int64(p.cfg.IdleTimeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.clients {
		if now-c.lastSeen.Load() < idle || c.inflight.Load() > 0 {
			continue
		}
		delete(p.clients, addr)
		if err := c.up.Close(); err != nil {
			p.log.Error("close upstream socket", "index", c.index, "err", err)
		}
		p.expired = append(p.expired, c.stats(false))
		if len(p.expired) > p.cfg.MaxClients {
			p.expired = slices.Delete(p.expired, 0, len(p.expired)-p.cfg.MaxClients)
		}
		p.log.Info("client expired", "index", c.index, "client", addr.String())
	}
}

// runSchedule applies timed steps at their offsets from New.
func (p *Proxy) runSchedule(steps []Step) {
	defer p.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for _, st := range steps {
		t.Reset(max(time.Duration(st.At)-time.Since(p.start), 0))
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.applyStep(st)
	}
}

// applyStep carries out one schedule step.
func (p *Proxy) applyStep(st Step) {
	var err error
	if st.Reset {
		err = p.ResetProfile(st.Select)
	} else {
		err = p.SetProfile(st.Select, *st.Profile)
	}
	if err != nil {
		p.log.Warn("schedule step", "at", time.Duration(st.At).String(), "select", st.Select.String(), "err", err)
	}
}
