package linkem

import (
	"net/netip"
	"time"
)

// Stats is a snapshot of a proxy's counters.
type Stats struct {
	Uptime time.Duration `json:"uptimeNs"`
	// Clients lists active clients and, up to MaxClients of them, expired ones, by index.
	Clients []ClientStats `json:"clients"`
	// RefusedPackets counts packets from new clients that got no mapping: over MaxClients, or
	// the upstream socket could not be opened.
	RefusedPackets uint64 `json:"refusedPackets"`
	// BufferedBytes is the memory held by packets waiting to leave.
	BufferedBytes int64 `json:"bufferedBytes"`
	// Release is how late packets left compared to the time the model gave them: the precision
	// of the timing core.
	Release Precision `json:"release"`
}

// Precision summarizes release lateness.
type Precision struct {
	Packets uint64        `json:"packets"`
	P50     time.Duration `json:"p50Ns"`
	P99     time.Duration `json:"p99Ns"`
	Max     time.Duration `json:"maxNs"`
}

// ClientStats is one client's mapping, profile and counters.
type ClientStats struct {
	// Index is the client's number in order of first packet, from 0.
	Index int `json:"index"`
	// Addr is the client's source address; Upstream is the local address of its upstream
	// socket, i.e. the source address the server sees.
	Addr     netip.AddrPort `json:"addr"`
	Upstream netip.AddrPort `json:"upstream"`
	// Active is false once the mapping expired.
	Active bool `json:"active"`
	// Source says what chose Profile: "default", "class:NAME" or the override's selector.
	Source  string   `json:"source"`
	Profile Profile  `json:"profile"`
	Up      DirStats `json:"up"`
	Down    DirStats `json:"down"`
}

// DirStats counts one direction of one client. In counts what arrived at the proxy, Out what it
// sent on (duplicates included).
type DirStats struct {
	PacketsIn  uint64 `json:"packetsIn"`
	BytesIn    uint64 `json:"bytesIn"`
	PacketsOut uint64 `json:"packetsOut"`
	BytesOut   uint64 `json:"bytesOut"`
	// DroppedLoss: dropped by the loss model. DroppedPolicer: dropped by the policer, its
	// bucket empty. DroppedQueue: tail-dropped by the full bottleneck queue. DroppedLimit:
	// dropped because the proxy's MaxBufferedBytes was reached.
	DroppedLoss    uint64 `json:"droppedLoss"`
	DroppedPolicer uint64 `json:"droppedPolicer"`
	DroppedQueue   uint64 `json:"droppedQueue"`
	DroppedLimit   uint64 `json:"droppedLimit"`
	// Duplicated: extra copies sent. Reordered: packets held back for reordering.
	Duplicated uint64 `json:"duplicated"`
	Reordered  uint64 `json:"reordered"`
	SendErrors uint64 `json:"sendErrors"`
	// Queueing delay in the bottleneck (0 without a rate cap), over all admitted packets, from a
	// histogram with buckets at most 6.25% wide.
	QueueDelayP50 time.Duration `json:"queueDelayP50Ns"`
	QueueDelayP95 time.Duration `json:"queueDelayP95Ns"`
	QueueDelayMax time.Duration `json:"queueDelayMaxNs"`
}

func (l *link) stats() DirStats {
	return DirStats{
		PacketsIn:      l.c.packetsIn,
		BytesIn:        l.c.bytesIn,
		PacketsOut:     l.c.packetsOut,
		BytesOut:       l.c.bytesOut,
		DroppedLoss:    l.c.droppedLoss,
		DroppedPolicer: l.c.droppedPolicer,
		DroppedQueue:   l.c.droppedQueue,
		DroppedLimit:   l.c.droppedLimit,
		Duplicated:     l.c.duplicated,
		Reordered:      l.c.reordered,
		SendErrors:     l.c.sendErrors,
		QueueDelayP50:  l.qdelay.quantile(0.50),
		QueueDelayP95:  l.qdelay.quantile(0.95),
		QueueDelayMax:  l.qdelay.max,
	}
}
