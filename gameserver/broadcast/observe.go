package broadcast

import (
	"time"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/session"
)

// Second is the server's state as the tick loop publishes it once per second (Options.OnSecond),
// for metrics.
type Second struct {
	// Tick is the number of ticks run.
	Tick uint64
	// Peers holds a PeerStat for every connected peer. The slice is the tick loop's own buffer,
	// reused every second: it is valid only during the call.
	Peers []PeerStat
	// Frames and States are the shared frame and replication-state pools; StateInUse is the
	// replication state the active sessions use (what the state budget is enforced on) and
	// InboxBytes their inboxes (what the ingress budget is enforced on).
	Frames     session.FramePoolStats
	States     session.StatePoolStats
	StateInUse int64
	InboxBytes int64
	// Transport is the ENet host's cumulative traffic.
	Transport enet.Totals
	// ConnectRefusals counts CONNECT datagrams the per-source connect limiter dropped, and
	// MalformedDatagrams the datagrams dropped before ENet parsed them.
	ConnectRefusals, MalformedDatagrams uint64
	// PeersRefused counts connections turned away with 1013 for want of room (the pools, or a
	// game that is full); GameRefused counts the joins the game refused, GameErrors those it
	// answered with an entity that does not exist.
	PeersRefused, GameRefused, GameErrors uint64
	// HandshakeRefusals counts the peers refused for no HELLO in time or a malformed one
	// (4002), SchemaRefusals those whose HELLO named another schema (4004).
	HandshakeRefusals, SchemaRefusals uint64
	// TokensAccepted counts the connect tokens admitted; TokenRefusals the tokens refused, by
	// reason (connecttoken.Reason: index 0, OK, stays 0).
	TokensAccepted uint64
	TokenRefusals  [connecttoken.NumReasons]uint64
	// Overloaded reports overload mode; OverloadSpans counts the times it was entered.
	Overloaded    bool
	OverloadSpans uint64
}

// PeerEnd is a session that ended (Options.OnPeerEnd): its last figures and how it ended.
type PeerEnd struct {
	PeerStat
	// Code is the close code the server sent (protocol.Close*); 0 when the peer disconnected or
	// timed out.
	Code uint32
}

// observer holds what the publications need; all of it is owned by the tick goroutine and
// allocated in New, so publishing allocates nothing.
type observer struct {
	onSecond  func(Second)
	onPeerEnd func(PeerEnd)
	next      time.Time
	second    Second
}

func newObserver(opts Options, slots int) observer {
	o := observer{onSecond: opts.OnSecond, onPeerEnd: opts.OnPeerEnd}
	if o.onSecond != nil {
		o.second.Peers = make([]PeerStat, 0, slots)
	}
	return o
}

// publishSecond calls OnSecond once a second has passed since the last publication. It runs on
// the tick goroutine after a tick.
func (b *Broadcaster) publishSecond(now time.Time) {
	o := &b.obs
	if o.onSecond == nil || now.Before(o.next) {
		return
	}
	o.next = now.Add(time.Second)
	sec := &o.second
	sec.Peers = sec.Peers[:0]
	for _, s := range b.sessions {
		if s.Active() {
			sec.Peers = append(sec.Peers, statOf(s))
		}
	}
	sec.Tick = b.ticks.Load()
	sec.Frames = b.frames.Stats()
	sec.States = b.states.Stats()
	sec.StateInUse = b.policy.InUse()
	sec.InboxBytes = b.inboxes
	sec.Transport = b.host.Totals()
	sec.ConnectRefusals = b.host.ConnectRefusals()
	sec.MalformedDatagrams = b.host.MalformedDatagrams()
	sec.PeersRefused, sec.GameRefused, sec.GameErrors = b.refused, b.gameRefused, b.gameErrors
	sec.HandshakeRefusals, sec.SchemaRefusals = b.handshake, b.mismatch
	sec.TokensAccepted, sec.TokenRefusals = b.tokenOK, b.tokenBad
	sec.Overloaded, sec.OverloadSpans = b.load.on, b.load.spans
	o.onSecond(*sec)
}

// peerEnded reports the session in slot to OnPeerEnd before it ends; code is the close code the
// server sends, 0 when the peer left.
func (b *Broadcaster) peerEnded(slot int, code uint32) {
	if b.obs.onPeerEnd != nil {
		b.obs.onPeerEnd(PeerEnd{PeerStat: statOf(b.sessions[slot]), Code: code})
	}
}

func statOf(s *session.Session) PeerStat {
	return PeerStat{Stats: s.Stats(), Counters: s.Counters(), Memory: s.MemoryUsage()}
}
