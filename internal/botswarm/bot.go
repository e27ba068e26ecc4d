package botswarm

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// The game's ENet channels.
const (
	channelCount = 2
	// channelData carries SNAPSHOTs to the client, and its ACKs and PINGs back, unreliably.
	channelData = 0
	// channelReliable carries RESETs to the client and its COMMANDs back, reliably and in order.
	channelReliable = 1
)

const (
	// maxWait bounds one blocking Service call, so a cancelled context is noticed promptly.
	maxWait = 50 * time.Millisecond
	// closeWait bounds the wait for the server to confirm a bot's disconnect.
	closeWait = time.Second
	// seqResync is how far a packet sequence may jump (either way) and still be read as loss
	// or lateness; a larger jump is a restarted numbering and counts as neither.
	seqResync = 4096
)

// bot is one game client: its own ENet host and peer, and the protocol client that decodes
// and acknowledges what the server sends. One goroutine runs it; Report and Progress read its
// record under mu.
type bot struct {
	id     int
	class  string
	target netip.AddrPort
	host   *enet.Host
	local  netip.AddrPort
	rng    *rand.Rand

	// Owned by the bot's goroutine.
	peer     enet.Peer
	cl       *client.Client
	out      []byte
	payload  []byte
	command  func(r *rand.Rand, dst []byte) []byte
	last     client.Stats
	lastTick uint32
	lastSeq  uint16
	haveSeq  bool

	mu  sync.Mutex
	rec record // guarded by mu
}

// record is the part of a bot that reports read.
type record struct {
	state       string
	err         string
	connectedAt time.Duration // from the swarm's start; -1 until connected
	closedAt    time.Duration // -1 while not closed
	closeCode   uint32
	totals      Totals
	series      []Second
}

func newBot(id int, class string, target netip.AddrPort, host *enet.Host, cfg *Config, seconds int) *bot {
	b := &bot{
		id:      id,
		class:   class,
		target:  target,
		host:    host,
		local:   host.Address(),
		rng:     rand.New(rand.NewPCG(cfg.Seed, uint64(id))),
		cl:      client.NewLayout(cfg.Layout),
		out:     make([]byte, 0, 512),
		payload: make([]byte, 0, protocol.MaxCommandPayload),
		command: cfg.Command,
		rec: record{
			state:       StateConnecting,
			connectedAt: -1,
			closedAt:    -1,
			series:      make([]Second, seconds),
		},
	}
	for t := range b.rec.series {
		b.rec.series[t].T = t
	}
	if id < len(cfg.Tokens) {
		_ = b.cl.SetToken(cfg.Tokens[id]) // Validate bounded it
	}
	return b
}

// run connects at connectAt, plays the client until end or ctx is done, then closes.
func (b *bot) run(ctx context.Context, cfg *Config, start, connectAt, end time.Time) {
	defer b.host.Destroy()
	if !sleepUntil(ctx, connectAt) {
		b.fail(start, StateConnecting, "")
		return
	}
	peer, err := b.host.Connect(b.target, channelCount, 0)
	if err != nil {
		b.fail(start, StateError, err.Error())
		return
	}
	b.peer = peer
	var ev enet.Event
	defer ev.Packet.Destroy()

	connectDeadline := time.Now().Add(cfg.ConnectTimeout)
	connected := false
	var nextPing, nextCmd time.Time
	cmdInterval := time.Duration(0)
	if cfg.CommandsHz > 0 {
		cmdInterval = time.Duration(float64(time.Second) / cfg.CommandsHz)
	}
	for {
		now := time.Now()
		if ctx.Err() != nil || !now.Before(end) {
			break
		}
		if !connected && !now.Before(connectDeadline) {
			peer.Reset()
			b.fail(start, StateTimeout, "")
			return
		}
		wake := end
		if !connected {
			wake = earlier(wake, connectDeadline)
		} else {
			wake = earlier(wake, nextPing)
			if cmdInterval > 0 {
				wake = earlier(wake, nextCmd)
			}
		}
		ok, err := b.host.Service(&ev, min(max(wake.Sub(now), 0), maxWait))
		now = time.Now()
		b.mu.Lock()
		// One Service reads every datagram waiting on the socket; the events they hold beyond
		// the first come from CheckEvents without more socket I/O.
		for ; ok && err == nil; ok, err = b.host.CheckEvents(&ev) {
			switch ev.Type {
			case enet.EventConnect:
				connected = true
				b.rec.state = StateConnected
				b.rec.connectedAt = now.Sub(start)
				// The HELLO goes first: the server starts the session once it has it.
				b.out = b.cl.AppendHello(b.out[:0])
				b.transmitReliable(b.out, &b.rec.totals.HellosSent)
				// Spread the bots' PING and COMMAND clocks over their periods.
				nextPing = now.Add(time.Duration(b.rng.Int64N(int64(client.PingIntervalMs * time.Millisecond))))
				if cmdInterval > 0 {
					nextCmd = now.Add(time.Duration(b.rng.Int64N(int64(cmdInterval))))
				}
			case enet.EventDisconnect:
				b.closed(start, now, connected, ev.Data)
				b.mu.Unlock()
				return
			case enet.EventReceive:
				b.receive(ev.Packet.Bytes(), start, now)
			}
		}
		if err != nil {
			b.rec.state, b.rec.err = StateError, err.Error()
			b.rec.closedAt = now.Sub(start)
			b.mu.Unlock()
			return
		}
		if connected {
			b.send(now, &nextPing, &nextCmd, cmdInterval)
			b.series(start, now).RTTMs = peer.LinkStats().RTT.Milliseconds()
		}
		b.mu.Unlock()
	}
	b.close(start, connected, &ev)
}

// receive handles one message from the server; b.mu is held.
func (b *bot) receive(data []byte, start, now time.Time) {
	sec := b.series(start, now)
	sec.Bytes += len(data)
	b.rec.totals.Bytes += uint64(len(data))
	typ, _ := protocol.PeekType(data)
	if err := b.cl.HandleMessage(data, now.UnixMilli()); err != nil {
		b.rec.totals.BadMessages++
		return
	}
	st := b.cl.Stats()
	if typ == protocol.MsgSnapshot {
		h := snapshotHeader(data)
		b.rec.totals.Packets++
		sec.Packets++
		if b.rec.totals.Packets == 1 || h.Tick != b.lastTick {
			b.lastTick = h.Tick
			b.rec.totals.Snapshots++
			sec.Hz++
		}
		lost, late := b.sequence(h.Seq)
		b.rec.totals.PacketsLost += uint64(lost)
		sec.Lost += lost
		if late {
			b.rec.totals.PacketsLate++
		}
		sec.Age.Add(st.LastAgeMs)
	}
	applied := int(st.RecordsApplied - b.last.RecordsApplied)
	unapplied := int(st.RecordsUnapplied - b.last.RecordsUnapplied)
	sec.Applied += applied
	sec.Unapplied += unapplied
	b.rec.totals.RecordsApplied = st.RecordsApplied
	b.rec.totals.RecordsStale = st.RecordsStale
	b.rec.totals.RecordsUnapplied = st.RecordsUnapplied
	b.rec.totals.Resets = st.Resets
	b.last = st
}

// sequence tracks the server's per-session packet sequence: it returns how many packets a
// forward jump skipped, and whether seq arrived after a newer one.
func (b *bot) sequence(seq uint16) (lost int, late bool) {
	if !b.haveSeq {
		b.haveSeq, b.lastSeq = true, seq
		return 0, false
	}
	lost, late, resync := seqStep(b.lastSeq, seq)
	if !late || resync {
		b.lastSeq = seq
	}
	return lost, late
}

// seqStep classifies seq after the newest sequence last: the number of packets skipped on a
// forward step, a late (older) packet, or a jump too large to be either (resync).
func seqStep(last, seq uint16) (lost int, late, resync bool) {
	d := seq - last
	switch {
	case d == 0:
		return 0, true, false // a duplicate is as good as late
	case d <= seqResync:
		return int(d) - 1, false, false
	case -d <= seqResync:
		return 0, true, false
	default:
		return 0, false, true
	}
}

// send queues the ACK due after receipts, a PING every PingIntervalMs and COMMANDs at their
// rate; b.mu is held. The bot's next Service call, which follows at once, sends them before it
// waits.
func (b *bot) send(now time.Time, nextPing, nextCmd *time.Time, cmdInterval time.Duration) {
	if b.cl.AckDue() {
		var ok bool
		if b.out, ok = b.cl.AppendAck(b.out[:0]); ok {
			b.transmit(b.out, &b.rec.totals.AcksSent)
		}
	}
	if !now.Before(*nextPing) {
		b.out = b.cl.AppendPing(b.out[:0], now.UnixMilli())
		b.transmit(b.out, &b.rec.totals.PingsSent)
		*nextPing = nextDue(*nextPing, now, client.PingIntervalMs*time.Millisecond)
	}
	if cmdInterval > 0 && !now.Before(*nextCmd) {
		b.payload = b.command(b.rng, b.payload[:0])
		var err error
		if b.out, err = b.cl.AppendCommand(b.out[:0], b.payload); err == nil {
			b.transmitReliable(b.out, &b.rec.totals.CommandsSent)
		} else {
			b.rec.totals.SendErrors++
		}
		*nextCmd = nextDue(*nextCmd, now, cmdInterval)
	}
}

func (b *bot) transmit(msg []byte, counter *uint64) {
	b.sendOn(channelData, msg, enet.Unreliable, counter)
}

func (b *bot) transmitReliable(msg []byte, counter *uint64) {
	b.sendOn(channelReliable, msg, enet.Reliable, counter)
}

func (b *bot) sendOn(channel uint8, msg []byte, flags enet.PacketFlags, counter *uint64) {
	if err := b.peer.Send(channel, msg, flags); err != nil {
		b.rec.totals.SendErrors++
		return
	}
	*counter++
}

// close ends a bot's session at the end of the run: a disconnect the server confirms, or a
// reset if it does not within closeWait.
func (b *bot) close(start time.Time, connected bool, ev *enet.Event) {
	now := time.Now()
	b.mu.Lock()
	if !connected {
		// The run ended during the handshake.
		b.rec.closedAt = now.Sub(start)
		b.mu.Unlock()
		b.peer.Reset()
		return
	}
	b.rec.state = StateDone
	b.rec.closedAt = now.Sub(start)
	b.mu.Unlock()
	b.peer.Disconnect(protocol.CloseGoingAway)
	deadline := now.Add(closeWait)
	for time.Now().Before(deadline) {
		ok, err := b.host.Service(ev, maxWait)
		for ; ok && err == nil; ok, err = b.host.Service(ev, 0) {
			if ev.Type == enet.EventDisconnect {
				return
			}
		}
		if err != nil {
			break
		}
	}
	b.peer.Reset()
}

// closed records the end of a session the server (or ENet's timeout) ended; b.mu is held.
func (b *bot) closed(start, now time.Time, connected bool, code uint32) {
	b.rec.closedAt = now.Sub(start)
	b.rec.closeCode = code
	switch {
	case connected:
		b.rec.state = StateClosed
	case code == 0:
		b.rec.state = StateTimeout
	default:
		b.rec.state = StateRefused
	}
}

func (b *bot) fail(start time.Time, state, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rec.state, b.rec.err = state, msg
	b.rec.closedAt = time.Since(start)
}

// series returns the second of the run that now falls in (the last one past the end); b.mu is
// held.
func (b *bot) series(start, now time.Time) *Second {
	t := int(now.Sub(start) / time.Second)
	return &b.rec.series[min(max(t, 0), len(b.rec.series)-1)]
}

// snapshotHeader reads the header of a SNAPSHOT that decoded (see protocol's SNAPSHOT layout).
func snapshotHeader(b []byte) protocol.SnapshotHeader {
	var r protocol.BitReader
	r.Reset(b)
	r.ReadBits(8) // version and type
	return protocol.SnapshotHeader{
		Tick:         uint32(r.ReadBits(32)),
		ServerTimeMs: uint32(r.ReadBits(32)),
		Seq:          uint16(r.ReadBits(16)),
		Flags:        uint8(r.ReadBits(8)),
	}
}

// nextDue advances a periodic deadline past now; a clock that fell more than a period behind
// restarts from now rather than firing a burst.
func nextDue(due, now time.Time, period time.Duration) time.Time {
	due = due.Add(period)
	if due.Before(now) {
		return now.Add(period)
	}
	return due
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sleepUntil waits until t; it reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
