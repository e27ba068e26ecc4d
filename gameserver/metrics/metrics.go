package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/session"
)

// Buckets of the histograms.
var (
	tickBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064}
	// Send rates up to the highest tick rate, 120 Hz, with the common tick rates as bounds.
	sendRateBuckets = []float64{1, 2, 5, 10, 15, 20, 30, 40, 50, 60, 90, 120}
	lossBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}
	rttBuckets      = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1}
)

// Label values of the closed sets. Every value is exported from the start, zero included, so a
// rate over any of them is defined before the first event.
var (
	rateClasses = [...]string{"1", "2", "4"}
	skipReasons = [...]string{"busy", "pool", "lag"}
	// closeCodes are the codes the server closes sessions with (protocol.Close*); the codes a game
	// chooses (protocol.CloseGameMin to CloseGameMax) are "game", any other "other".
	closeCodes     = [...]uint32{protocol.CloseGoingAway, protocol.CloseAbuse, protocol.CloseStalled, protocol.CloseNoPing, protocol.CloseRefused}
	closeLabels    = [...]string{"1001", "1008", "1013", "4001", "4003", "game", "other"}
	refusalReasons = [...]string{"budget", "inbox_full", "oversize", "malformed"}
	pools          = [...]string{"frame", "state", "ingress"}
)

// Indices into the totals arrays.
const (
	skipBusy = iota
	skipPool
	skipLag
)

const (
	refusedBudget = iota
	refusedInbox
	refusedOversize
	refusedMalformed
)

const (
	poolFrame = iota
	poolState
	poolIngress
)

// Options configure a Collector.
type Options struct {
	// Slots is the server's peer-slot count (broadcast.Options.MaxPeers); the per-peer buffers
	// are sized for it up front.
	Slots int
	// Status returns the config the server runs (admin.Server.Status): its generation and hash
	// are exported, its observability.perPeerMetrics decides whether per-peer series are, and its
	// memory.ingressPoolBudgetBytes is the ingress pool's budget. nil exports no config series
	// and keeps per-peer series on.
	Status func() netcode.ConfigStatus
}

// peer is what is exported of one connected peer.
type peer struct {
	slot        int
	sendHz      float64
	loss        float64
	enetLoss    float64
	rttSeconds  float64
	throttle    float64
	bytesSent   uint64
	frameBudget int
	ceiling     float64
	class       int // index into rateClasses
}

// counted is the part of a session's counters that enters the server's totals.
type counted struct {
	skips   [len(skipReasons)]uint64
	refused [len(refusalReasons)]uint64
}

func countedOf(c *session.Counters) counted {
	return counted{
		skips:   [len(skipReasons)]uint64{skipBusy: c.SkipsBusy, skipPool: c.SkipsPool, skipLag: c.SkipsLag},
		refused: [len(refusalReasons)]uint64{refusedBudget: c.IngressRefused, refusedInbox: c.InboxRefused, refusedOversize: c.Oversize, refusedMalformed: c.Malformed},
	}
}

// snapshot is the state the tick loop publishes and a scrape reads.
type snapshot struct {
	peers   []peer
	byClass [len(rateClasses)]int
	// Server totals.
	skips       [len(skipReasons)]uint64
	refused     [len(refusalReasons)]uint64
	closes      [len(closeLabels)]uint64
	disconnects uint64
	// Pools: bytes held and budget; the ingress budget comes from the running config.
	poolBytes   [len(pools)]int64
	poolBudget  [len(pools)]int64
	transport   enet.Totals
	connRefused uint64
	malformed   uint64
	peerRefused uint64
	gameRefused uint64
	gameErrors  uint64
	handshake   [2]uint64 // no or malformed HELLO, another schema
	tokensOK    uint64
	tokensBad   [connecttoken.NumReasons]uint64
	overloaded  bool
	spans       uint64
}

// copyFrom copies src into s, reusing s's peer buffer.
func (s *snapshot) copyFrom(src *snapshot) {
	peers := s.peers[:0]
	*s = *src
	peers = append(peers, src.peers...)
	s.peers = peers
}

// Collector is a game server's metrics. Feed it through ObserveTick, ObserveSecond and
// ObservePeerEnd (broadcast.Options.OnTick, OnSecond and OnPeerEnd) and register it with a
// prometheus.Registerer. Create it with New.
type Collector struct {
	status func() netcode.ConfigStatus

	// Updated on the tick goroutine without a lock.
	tick      prometheus.Histogram
	peersRate prometheus.Histogram
	peersLoss prometheus.Histogram
	peersRTT  prometheus.Histogram
	connected atomic.Int64

	// mu guards pub and folded; the tick goroutine holds it for a copy once a second.
	mu     sync.Mutex
	pub    snapshot
	folded []counted // by slot: what the totals hold of the session in that slot

	// scrapeMu serializes scrapes over their copy of pub.
	scrapeMu sync.Mutex
	scrape   snapshot

	descs descs
}

// descs are the descriptions of the series built at scrape time.
type descs struct {
	connected, sessions, skips, closes, disconnects, refused           *prometheus.Desc
	poolBytes, poolBudget, connRefused, malformed, peerRefused         *prometheus.Desc
	gameRefused, gameErrors, handshake, tokensOK, tokensBad            *prometheus.Desc
	txBytes, rxBytes, txPackets, rxPackets, cHeap, overloaded, spans   *prometheus.Desc
	generation, info                                                   *prometheus.Desc
	peerRate, peerLoss, peerEnetLoss, peerRTT, peerThrottle, peerBytes *prometheus.Desc
	peerBudget, peerCeiling                                            *prometheus.Desc
}

func newDescs() descs {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return descs{
		connected:   d("netfleet_gameserver_connected_peers", "Peers connected to the game server."),
		sessions:    d("netfleet_gameserver_sessions", "Connected sessions by rate class: served every tick (1), every 2nd (2) or every 4th (4).", "rate_class"),
		skips:       d("netfleet_gameserver_session_skips_total", "Due ticks a session could not be served on: busy (both frame slots taken), pool (frame pool exhausted), lag (the client had not applied what it was sent).", "reason"),
		closes:      d("netfleet_gameserver_session_closes_total", "Sessions the server closed, by close code: 1001 going away, 1008 abuse, 1013 stalled, 4001 no ping, 4003 removed by the game, game (a code of the game's own).", "code"),
		disconnects: d("netfleet_gameserver_peer_disconnects_total", "Sessions ended by the peer: its disconnect or its timeout."),
		refused:     d("netfleet_gameserver_ingress_refused_messages_total", "Client messages refused: budget (over ingress.bytesPerSecond), inbox_full, oversize (over memory.maxInboundMessageBytes), malformed.", "reason"),
		poolBytes:   d("netfleet_gameserver_pool_bytes", "Bytes held by a pool: frame (frames allocated), state (replication state in use and spare), ingress (inboxes of connected sessions).", "pool"),
		poolBudget:  d("netfleet_gameserver_pool_budget_bytes", "A pool's budget (memory.framePoolBudgetBytes, statePoolBudgetBytes, ingressPoolBudgetBytes).", "pool"),
		connRefused: d("netfleet_gameserver_connect_refusals_total", "CONNECT datagrams dropped by the per-source connect limiter (ingress.connectsPerSecondPerHost)."),
		malformed:   d("netfleet_gameserver_malformed_datagrams_total", "Datagrams dropped before ENet parsed them."),
		peerRefused: d("netfleet_gameserver_peer_refusals_total", "Connections turned away with 1013 for want of room: in the pools, or in a game that is full."),
		gameRefused: d("netfleet_gameserver_game_join_refusals_total", "Joins the game refused."),
		gameErrors:  d("netfleet_gameserver_game_join_errors_total", "Joins the game answered with an entity that does not exist (the player is refused with 1011)."),
		handshake:   d("netfleet_gameserver_handshake_refusals_total", "Connections refused before their session: handshake (no HELLO in time, or a malformed one: 4002), schema (a HELLO of another schema: 4004).", "reason"),
		tokensOK:    d("netfleet_gameserver_connect_tokens_accepted_total", "Connect tokens admitted (connectTokens.mode Optional or Required)."),
		tokensBad:   d("netfleet_gameserver_connect_token_refusals_total", "Connections refused for their connect token, before their session: missing (4005), malformed and forged (4006), expired (4007), wrong_server (4008), wrong_allocation (4009), replayed (4010), full (the replay cache is full: 1013).", "reason"),
		txBytes:     d("netfleet_gameserver_transport_sent_bytes_total", "Bytes the ENet host sent, ENet headers included."),
		rxBytes:     d("netfleet_gameserver_transport_received_bytes_total", "Bytes the ENet host received, ENet headers included."),
		txPackets:   d("netfleet_gameserver_transport_sent_packets_total", "Datagrams the ENet host sent."),
		rxPackets:   d("netfleet_gameserver_transport_received_packets_total", "Datagrams the ENet host received."),
		cHeap:       d("netfleet_gameserver_c_heap_bytes", "Bytes allocated from the C heap, where ENet keeps hosts, peers and packets."),
		overloaded:  d("netfleet_gameserver_overloaded", "1 while the tick loop runs in overload mode (sessions served a detail level lower)."),
		spans:       d("netfleet_gameserver_overload_spans_total", "Times the tick loop entered overload mode."),
		generation:  d("netfleet_gameserver_config_generation", "The generation of the running netcode config (the GameServer's metadata.generation; 0 before the first push)."),
		info:        d("netfleet_gameserver_config_info", "The running netcode config's hash, as a label; always 1.", "hash"),

		peerRate:     d("netfleet_gameserver_peer_send_rate_hertz", "A peer's snapshot send rate over the last second.", "peer"),
		peerLoss:     d("netfleet_gameserver_peer_loss_ratio", "A peer's application-level snapshot loss, from the client's acknowledgements.", "peer"),
		peerEnetLoss: d("netfleet_gameserver_peer_enet_loss_ratio", "A peer's reliable-packet loss as ENet measures it.", "peer"),
		peerRTT:      d("netfleet_gameserver_peer_rtt_seconds", "A peer's smoothed round-trip time as ENet measures it.", "peer"),
		peerThrottle: d("netfleet_gameserver_peer_throttle_ratio", "A peer's congestion throttle, in [congestion.minSendHz / tickRateHz, 1].", "peer"),
		peerBytes:    d("netfleet_gameserver_peer_sent_bytes_total", "Payload bytes handed to the transport for a peer since it connected.", "peer"),
		peerBudget:   d("netfleet_gameserver_peer_frame_budget_bytes", "The byte budget of a peer's last frame.", "peer"),
		peerCeiling: d("netfleet_gameserver_peer_rate_ceiling_bytes_per_second",
			"The bottleneck ceiling the congestion controller holds on a peer's byte rate (about what its path delivered when a queue built on it); 0 when its path has shown none.", "peer"),
	}
}

// New returns a Collector.
func New(opts Options) *Collector {
	slots := max(opts.Slots, 0)
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	c := &Collector{
		status: opts.Status,
		tick: hist("netfleet_gameserver_tick_duration_seconds",
			"Time one tick of the game server takes, from its start to its flush.", tickBuckets),
		peersRate: hist("netfleet_gameserver_peers_send_rate_hertz",
			"Every connected peer's snapshot send rate, observed once a second: a distribution over peer-seconds.", sendRateBuckets),
		peersLoss: hist("netfleet_gameserver_peers_loss_ratio",
			"Every connected peer's application-level snapshot loss, observed once a second: a distribution over peer-seconds.", lossBuckets),
		peersRTT: hist("netfleet_gameserver_peers_rtt_seconds",
			"Every connected peer's round-trip time, observed once a second: a distribution over peer-seconds.", rttBuckets),
		folded: make([]counted, slots),
		descs:  newDescs(),
	}
	c.pub.peers = make([]peer, 0, slots)
	c.scrape.peers = make([]peer, 0, slots)
	return c
}

// ObserveTick records one tick (broadcast.Options.OnTick). It allocates nothing.
func (c *Collector) ObserveTick(ts broadcast.TickStats) {
	c.tick.Observe(ts.Work.Seconds())
	c.connected.Store(int64(ts.Peers))
}

// ObserveSecond takes the tick loop's once-a-second publication (broadcast.Options.OnSecond):
// every connected peer's figures, observed into the per-server histograms and kept for the next
// scrape, and the server's pools and transport counters. It allocates nothing once the buffers
// have grown to the peer count (they are sized for Options.Slots up front).
func (c *Collector) ObserveSecond(sec broadcast.Second) {
	for i := range sec.Peers {
		st := &sec.Peers[i].Stats
		c.peersRate.Observe(st.SendRateHz)
		c.peersLoss.Observe(st.LossRatio)
		c.peersRTT.Observe(float64(st.RTTMs) / 1000)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.pub
	p.peers = p.peers[:0]
	p.byClass = [len(rateClasses)]int{}
	for i := range sec.Peers {
		ps := &sec.Peers[i]
		st := &ps.Stats
		p.peers = append(p.peers, peer{
			slot:        st.Slot,
			sendHz:      st.SendRateHz,
			loss:        st.LossRatio,
			enetLoss:    st.EnetLossRatio,
			rttSeconds:  float64(st.RTTMs) / 1000,
			throttle:    st.Throttle,
			bytesSent:   ps.Counters.BytesSent,
			frameBudget: st.FrameBudgetBytes,
			ceiling:     st.CeilingBytesPerSec,
		})
		pp := &p.peers[len(p.peers)-1]
		pp.class = classIndex(st.RateClass)
		p.byClass[pp.class]++
		c.fold(st.Slot, &ps.Counters)
	}
	p.poolBytes = [len(pools)]int64{
		poolFrame:   sec.Frames.HeldBytes,
		poolState:   sec.StateInUse + sec.States.SpareBytes,
		poolIngress: sec.InboxBytes,
	}
	p.poolBudget[poolFrame] = sec.Frames.BudgetBytes
	p.poolBudget[poolState] = sec.States.BudgetBytes
	p.transport = sec.Transport
	p.connRefused = sec.ConnectRefusals
	p.malformed = sec.MalformedDatagrams
	p.peerRefused = sec.PeersRefused
	p.gameRefused, p.gameErrors = sec.GameRefused, sec.GameErrors
	p.handshake = [2]uint64{sec.HandshakeRefusals, sec.SchemaRefusals}
	p.tokensOK, p.tokensBad = sec.TokensAccepted, sec.TokenRefusals
	p.overloaded = sec.Overloaded
	p.spans = sec.OverloadSpans
}

// ObservePeerEnd takes a session that ended (broadcast.Options.OnPeerEnd): its last counts enter
// the totals, its close is counted, and its series go at once; a new peer in the slot starts
// afresh. It allocates nothing.
func (c *Collector) ObservePeerEnd(end broadcast.PeerEnd) {
	slot := end.Stats.Slot
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fold(slot, &end.Counters)
	if slot >= 0 && slot < len(c.folded) {
		c.folded[slot] = counted{}
	}
	p := &c.pub
	for i := range p.peers {
		if p.peers[i].slot == slot {
			p.byClass[p.peers[i].class]--
			p.peers[i] = p.peers[len(p.peers)-1]
			p.peers = p.peers[:len(p.peers)-1]
			break
		}
	}
	if end.Code == 0 {
		p.disconnects++
		return
	}
	p.closes[closeIndex(end.Code)]++
}

// closeIndex is the closeLabels index of a close code.
func closeIndex(code uint32) int {
	for i, c := range closeCodes {
		if c == code {
			return i
		}
	}
	if code >= protocol.CloseGameMin && code <= protocol.CloseGameMax {
		return len(closeCodes) // "game"
	}
	return len(closeCodes) + 1 // "other"
}

// fold adds what the session in slot counted since the last fold to the totals. A counter below
// what was folded means the slot holds a new session whose end was not seen; all of its counts
// are new. The caller holds mu.
func (c *Collector) fold(slot int, ctr *session.Counters) {
	if slot < 0 {
		return
	}
	if slot >= len(c.folded) {
		// More slots than Options.Slots said: grow once.
		c.folded = append(c.folded, make([]counted, slot+1-len(c.folded))...)
	}
	cur, last := countedOf(ctr), &c.folded[slot]
	p := &c.pub
	for i := range cur.skips {
		p.skips[i] += delta(cur.skips[i], last.skips[i])
	}
	for i := range cur.refused {
		p.refused[i] += delta(cur.refused[i], last.refused[i])
	}
	*last = cur
}

// classIndex is the index of a rate class in rateClasses.
func classIndex(class int) int {
	switch class {
	case 2:
		return 1
	case 4:
		return 2
	}
	return 0
}

func delta(cur, last uint64) uint64 {
	if cur < last {
		return cur
	}
	return cur - last
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, h := range []prometheus.Histogram{c.tick, c.peersRate, c.peersLoss, c.peersRTT} {
		h.Describe(ch)
	}
	d := &c.descs
	for _, desc := range []*prometheus.Desc{
		d.connected, d.sessions, d.skips, d.closes, d.disconnects, d.refused, d.poolBytes, d.poolBudget,
		d.connRefused, d.malformed, d.peerRefused, d.gameRefused, d.gameErrors, d.handshake, d.tokensOK, d.tokensBad, d.txBytes, d.rxBytes, d.txPackets, d.rxPackets,
		d.cHeap, d.overloaded, d.spans, d.generation, d.info, d.peerRate, d.peerLoss, d.peerEnetLoss,
		d.peerRTT, d.peerThrottle, d.peerBytes, d.peerBudget, d.peerCeiling,
	} {
		ch <- desc
	}
}

// Collect implements prometheus.Collector: the histograms, then the series built from a copy of
// the last publication, taken under the lock the tick loop publishes under.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range []prometheus.Histogram{c.tick, c.peersRate, c.peersLoss, c.peersRTT} {
		h.Collect(ch)
	}
	perPeer := true
	var ingressBudget int64
	if c.status != nil {
		st := c.status()
		perPeer = st.Config.Observability.PerPeerMetricsEnabled()
		ingressBudget = st.Config.Memory.IngressPoolBudgetBytes
		ch <- prometheus.MustNewConstMetric(c.descs.generation, prometheus.GaugeValue, float64(st.Generation))
		ch <- prometheus.MustNewConstMetric(c.descs.info, prometheus.GaugeValue, 1, st.Hash)
	}

	c.scrapeMu.Lock()
	defer c.scrapeMu.Unlock()
	c.mu.Lock()
	c.scrape.copyFrom(&c.pub)
	c.mu.Unlock()
	s := &c.scrape
	s.poolBudget[poolIngress] = ingressBudget

	d := &c.descs
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(d.connected, float64(c.connected.Load()))
	for i, class := range rateClasses {
		gauge(d.sessions, float64(s.byClass[i]), class)
	}
	for i, reason := range skipReasons {
		counter(d.skips, s.skips[i], reason)
	}
	for i, code := range closeLabels {
		counter(d.closes, s.closes[i], code)
	}
	counter(d.disconnects, s.disconnects)
	for i, reason := range refusalReasons {
		counter(d.refused, s.refused[i], reason)
	}
	for i, pool := range pools {
		gauge(d.poolBytes, float64(s.poolBytes[i]), pool)
		gauge(d.poolBudget, float64(s.poolBudget[i]), pool)
	}
	counter(d.connRefused, s.connRefused)
	counter(d.malformed, s.malformed)
	counter(d.peerRefused, s.peerRefused)
	counter(d.gameRefused, s.gameRefused)
	counter(d.gameErrors, s.gameErrors)
	counter(d.handshake, s.handshake[0], "handshake")
	counter(d.handshake, s.handshake[1], "schema")
	counter(d.tokensOK, s.tokensOK)
	for r := connecttoken.OK + 1; r < connecttoken.NumReasons; r++ {
		counter(d.tokensBad, s.tokensBad[r], r.String())
	}
	counter(d.txBytes, s.transport.SentBytes)
	counter(d.rxBytes, s.transport.ReceivedBytes)
	counter(d.txPackets, s.transport.SentPackets)
	counter(d.rxPackets, s.transport.ReceivedPackets)
	gauge(d.cHeap, float64(enet.CHeapBytes()))
	overloaded := 0.0
	if s.overloaded {
		overloaded = 1
	}
	gauge(d.overloaded, overloaded)
	counter(d.spans, s.spans)

	if !perPeer {
		return
	}
	for i := range s.peers {
		p := &s.peers[i]
		slot := strconv.Itoa(p.slot)
		gauge(d.peerRate, p.sendHz, slot)
		gauge(d.peerLoss, p.loss, slot)
		gauge(d.peerEnetLoss, p.enetLoss, slot)
		gauge(d.peerRTT, p.rttSeconds, slot)
		gauge(d.peerThrottle, p.throttle, slot)
		counter(d.peerBytes, p.bytesSent, slot)
		gauge(d.peerBudget, float64(p.frameBudget), slot)
		gauge(d.peerCeiling, p.ceiling, slot)
	}
}
