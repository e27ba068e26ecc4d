package botswarm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Churn limits and defaults.
const (
	// MaxChurnRate bounds the connect attempts per second of one churn run.
	MaxChurnRate = 100000
	// DefaultChurnTimeout is how long a churn attempt waits for its handshake, and then for the
	// server to confirm its close, when ChurnConfig leaves them 0.
	DefaultChurnTimeout = time.Second
)

// ChurnConfig describes a churn run: connect/close cycles started at a fixed rate from one
// ENet host (one source address), which is what a server's per-source connect limiter sees.
type ChurnConfig struct {
	// Server is the address to connect to.
	Server netip.AddrPort
	// Rate is the connect attempts started per second.
	Rate float64
	// Duration is how long attempts are started; the run then waits for the ones in flight, up
	// to ConnectTimeout + CloseTimeout longer.
	Duration time.Duration
	// ConnectTimeout and CloseTimeout bound the handshake and the wait for the server to confirm
	// the close; DefaultChurnTimeout if 0. An attempt past either is reset.
	ConnectTimeout time.Duration
	CloseTimeout   time.Duration
	// Peers is the host's peer slots, which bounds the attempts in flight; enet.MaxPeers if 0.
	Peers int
	// Bind is the local IPv4 address; 0.0.0.0 if unset.
	Bind netip.Addr
	// Layout is the game's schema, which the attempts' HELLO names; nil is the schema of a game
	// that declares none.
	Layout *protocol.Layout
}

// Validate reports the first invalid setting.
func (c *ChurnConfig) Validate() error {
	switch {
	case !c.Server.IsValid() || c.Server.Port() == 0:
		return fmt.Errorf("churn: server %q is not an address with a port", c.Server)
	case !(c.Rate > 0 && c.Rate <= MaxChurnRate):
		return fmt.Errorf("churn: rate %v out of range (0, %d]", c.Rate, MaxChurnRate)
	case c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("churn: duration %v out of range (0, %v]", c.Duration, MaxDuration)
	case c.ConnectTimeout < 0 || c.CloseTimeout < 0:
		return errors.New("churn: timeouts must not be negative")
	case c.Peers < 0 || c.Peers > enet.MaxPeers:
		return fmt.Errorf("churn: peers %d out of range 0..%d", c.Peers, enet.MaxPeers)
	case c.Bind.IsValid() && !c.Bind.Unmap().Is4():
		return fmt.Errorf("churn: bind address %s is not IPv4", c.Bind)
	}
	return nil
}

// ChurnReport is the result of a churn run. Every attempt ends as exactly one of NoSlot,
// Refused, Timeouts, ClosedByServer, CloseTimeouts, Cycles or Unfinished.
type ChurnReport struct {
	Server    string  `json:"server"`
	Rate      float64 `json:"rate"`
	ElapsedMs int64   `json:"elapsedMs"`
	// Attempts counts connects started or skipped for want of a free peer slot (NoSlot).
	Attempts uint64 `json:"attempts"`
	NoSlot   uint64 `json:"noSlot"`
	// Connected counts completed handshakes.
	Connected uint64 `json:"connected"`
	// Cycles counts attempts that connected and whose close the server confirmed.
	Cycles uint64 `json:"cycles"`
	// Refused: the server answered the connect with a disconnect. Timeouts: no handshake
	// within ConnectTimeout (a CONNECT dropped by the server's limiter ends here).
	Refused  uint64 `json:"refused"`
	Timeouts uint64 `json:"timeouts"`
	// ClosedByServer: connected, then closed by the server before the churn closed it.
	// CloseTimeouts: the close was not confirmed within CloseTimeout.
	ClosedByServer uint64 `json:"closedByServer"`
	CloseTimeouts  uint64 `json:"closeTimeouts"`
	// Unfinished attempts were still in flight when the drain ended.
	Unfinished uint64 `json:"unfinished"`
	// CyclesPerSec is Cycles over the time from the first attempt to the last completed cycle;
	// AttemptsPerSec is Attempts over the attempt phase.
	CyclesPerSec   float64 `json:"cyclesPerSec"`
	AttemptsPerSec float64 `json:"attemptsPerSec"`
	// Handshake time of connected attempts, in ms.
	ConnectMsP50 float64 `json:"connectMsP50"`
	ConnectMsP95 float64 `json:"connectMsP95"`
	// CloseCodes counts the disconnect data of refusals and server closes.
	CloseCodes map[uint32]uint64 `json:"closeCodes,omitempty"`
	Series     []ChurnSecond     `json:"series"`
}

// ChurnSecond counts what happened in one second of a churn run.
type ChurnSecond struct {
	T         int `json:"t"`
	Attempts  int `json:"attempts"`
	Connected int `json:"connected"`
	Cycles    int `json:"cycles"`
	Refused   int `json:"refused"`
	Timeouts  int `json:"timeouts"`
}

type churnPhase uint8

const (
	phaseIdle churnPhase = iota
	phaseConnecting
	phaseClosing
)

// churnSlot is the attempt occupying one peer slot; gen tells a deadline queued for an earlier
// attempt in the same slot from the current one.
type churnSlot struct {
	phase   churnPhase
	gen     uint32
	started time.Time
}

type churnDeadline struct {
	slot int
	gen  uint32
	at   time.Time
}

// churn is one run's state; a single goroutine drives it.
type churn struct {
	cfg      ChurnConfig
	host     *enet.Host
	start    time.Time
	slots    []churnSlot
	inFlight int
	// Deadlines are queued in the order they were set and share one timeout per queue, so each
	// queue is sorted by time.
	connectQ, closeQ []churnDeadline
	// toClose holds the peers connected during the current Service batch.
	toClose     []enet.Peer
	connectHist ageTotal
	lastCycle   time.Time
	r           ChurnReport
	hello       []byte // the HELLO every connection sends first, so that the server starts its session
}

// RunChurn runs connect/close cycles from one host as cfg says and reports what happened.
func RunChurn(ctx context.Context, cfg ChurnConfig) (*ChurnReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultChurnTimeout
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = DefaultChurnTimeout
	}
	if cfg.Peers == 0 {
		cfg.Peers = enet.MaxPeers
	}
	bind := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if cfg.Bind.IsValid() {
		bind = netip.AddrPortFrom(cfg.Bind.Unmap(), 0)
	}
	h, err := enet.NewHost(enet.Config{Address: bind, Peers: cfg.Peers, Channels: channelCount})
	if err != nil {
		return nil, fmt.Errorf("churn: %w", err)
	}
	defer h.Destroy()
	seconds := int((cfg.Duration+cfg.ConnectTimeout+cfg.CloseTimeout)/time.Second) + 2
	c := &churn{
		cfg:   cfg,
		host:  h,
		slots: make([]churnSlot, cfg.Peers),
		hello: client.NewLayout(cfg.Layout).AppendHello(nil),
		r: ChurnReport{
			Server:     cfg.Server.String(),
			Rate:       cfg.Rate,
			CloseCodes: map[uint32]uint64{},
			Series:     make([]ChurnSecond, seconds),
		},
	}
	for t := range c.r.Series {
		c.r.Series[t].T = t
	}
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	return &c.r, nil
}

func (c *churn) run(ctx context.Context) error {
	var ev enet.Event
	defer ev.Packet.Destroy()
	total := uint64(math.Ceil(c.cfg.Rate * c.cfg.Duration.Seconds()))
	c.start = time.Now()
	end := c.start.Add(c.cfg.Duration)
	drainEnd := end.Add(c.cfg.ConnectTimeout + c.cfg.CloseTimeout)
	for {
		now := time.Now()
		if ctx.Err() != nil || !now.Before(drainEnd) || c.r.Attempts == total && c.inFlight == 0 {
			break
		}
		// Start every attempt that is due; a late loop catches up rather than dropping them.
		var next time.Time
		for c.r.Attempts < total {
			next = c.start.Add(time.Duration(float64(c.r.Attempts) / c.cfg.Rate * float64(time.Second)))
			if next.After(now) {
				break
			}
			c.attempt(now)
		}
		c.expire(now)
		wake := drainEnd
		if c.r.Attempts < total {
			wake = earlier(wake, next)
		}
		if len(c.connectQ) > 0 {
			wake = earlier(wake, c.connectQ[0].at)
		}
		if len(c.closeQ) > 0 {
			wake = earlier(wake, c.closeQ[0].at)
		}
		// ENet waits in whole milliseconds; waiting at least one keeps the loop from spinning,
		// and attempts due meanwhile start together.
		wait := min(max(wake.Sub(now), time.Millisecond), maxWait)
		ok, err := c.host.Service(&ev, wait)
		for ; ok && err == nil; ok, err = c.host.Service(&ev, 0) {
			c.event(&ev, time.Now())
		}
		if err != nil {
			return fmt.Errorf("churn: %w", err)
		}
		c.closeConnected()
	}
	c.r.Unfinished = uint64(c.inFlight)
	c.finish(time.Now(), end)
	return nil
}

func (c *churn) attempt(now time.Time) {
	c.r.Attempts++
	c.second(now).Attempts++
	p, err := c.host.Connect(c.cfg.Server, channelCount, 0)
	if err != nil {
		c.r.NoSlot++
		return
	}
	s := &c.slots[p.Slot()]
	s.phase, s.started = phaseConnecting, now
	s.gen++
	c.inFlight++
	c.connectQ = append(c.connectQ, churnDeadline{slot: p.Slot(), gen: s.gen, at: now.Add(c.cfg.ConnectTimeout)})
}

func (c *churn) event(ev *enet.Event, now time.Time) {
	slot := ev.Peer.Slot()
	if slot < 0 || slot >= len(c.slots) {
		return
	}
	s := &c.slots[slot]
	switch ev.Type {
	case enet.EventConnect:
		if s.phase != phaseConnecting {
			return
		}
		c.r.Connected++
		c.second(now).Connected++
		_ = ev.Peer.Send(channelReliable, c.hello, enet.Reliable)
		c.connectHist.add(int32(min(now.Sub(s.started).Milliseconds(), math.MaxInt32)))
		s.phase = phaseClosing
		c.closeQ = append(c.closeQ, churnDeadline{slot: slot, gen: s.gen, at: now.Add(c.cfg.CloseTimeout)})
		c.toClose = append(c.toClose, ev.Peer)
	case enet.EventDisconnect:
		switch s.phase {
		case phaseConnecting:
			if ev.Data == 0 {
				c.r.Timeouts++
				c.second(now).Timeouts++
			} else {
				c.r.Refused++
				c.second(now).Refused++
				c.r.CloseCodes[ev.Data]++
			}
		case phaseClosing:
			if ev.Data == protocol.CloseGoingAway || ev.Data == 0 {
				// Our own close confirmed (ENet echoes no data back for it).
				c.r.Cycles++
				c.second(now).Cycles++
				c.lastCycle = now
			} else {
				c.r.ClosedByServer++
				c.r.CloseCodes[ev.Data]++
			}
		case phaseIdle:
			return
		}
		s.phase = phaseIdle
		c.inFlight--
	case enet.EventReceive, enet.EventNone:
	}
}

// closeConnected closes the sessions that just connected. ENet's disconnect drops the
// peer's queued acknowledgements, the one of the server's connect verification included, and
// a server still waiting for that acknowledgement resets the peer without confirming the
// close; so the acknowledgements are flushed first.
func (c *churn) closeConnected() {
	if len(c.toClose) == 0 {
		return
	}
	c.host.Flush()
	for _, p := range c.toClose {
		p.Disconnect(protocol.CloseGoingAway)
	}
	c.toClose = c.toClose[:0]
}

// expire resets the attempts whose handshake or close is overdue.
func (c *churn) expire(now time.Time) {
	for len(c.connectQ) > 0 && !c.connectQ[0].at.After(now) {
		d := c.connectQ[0]
		c.connectQ = c.connectQ[1:]
		if s := &c.slots[d.slot]; s.gen == d.gen && s.phase == phaseConnecting {
			c.host.Peer(d.slot).Reset()
			s.phase = phaseIdle
			c.inFlight--
			c.r.Timeouts++
			c.second(now).Timeouts++
		}
	}
	for len(c.closeQ) > 0 && !c.closeQ[0].at.After(now) {
		d := c.closeQ[0]
		c.closeQ = c.closeQ[1:]
		if s := &c.slots[d.slot]; s.gen == d.gen && s.phase == phaseClosing {
			c.host.Peer(d.slot).Reset()
			s.phase = phaseIdle
			c.inFlight--
			c.r.CloseTimeouts++
		}
	}
}

func (c *churn) second(now time.Time) *ChurnSecond {
	t := int(now.Sub(c.start) / time.Second)
	return &c.r.Series[min(max(t, 0), len(c.r.Series)-1)]
}

func (c *churn) finish(now, end time.Time) {
	c.r.ElapsedMs = now.Sub(c.start).Milliseconds()
	c.r.AttemptsPerSec = float64(c.r.Attempts) / earlier(now, end).Sub(c.start).Seconds()
	if c.r.Cycles > 0 {
		c.r.CyclesPerSec = float64(c.r.Cycles) / c.lastCycle.Sub(c.start).Seconds()
	}
	c.r.ConnectMsP50 = c.connectHist.quantile(0.50)
	c.r.ConnectMsP95 = c.connectHist.quantile(0.95)
	last := len(c.r.Series)
	for last > 0 && c.r.Series[last-1] == (ChurnSecond{T: last - 1}) {
		last--
	}
	c.r.Series = c.r.Series[:last]
}
