package congestionlab

import (
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/linkem"
)

// Result is what one run observed.
type Result struct {
	Options Options `json:"options"`
	// ImpairFrom and ImpairTo bound the impairment in seconds of the bots' series: it applies in
	// [ImpairFrom, ImpairTo). The drop class is capped from DropFrom.
	ImpairFrom int `json:"impairFrom"`
	ImpairTo   int `json:"impairTo"`
	DropFrom   int `json:"dropFrom"`
	// Demand is each proxied client's measured downstream demand before the impairment, in UDP
	// payload bytes per second at linkem, and Limit the rate its cap or policer held it to (0:
	// none); keyed by bot id.
	Demand map[int]float64 `json:"demand"`
	Limit  map[int]int64   `json:"limit"`
	// LinkemAtEnd are the proxy's per-client stats when the impairment ended, before the
	// profiles were cleared: their queueing delays cover the run up to that moment.
	LinkemAtEnd linkem.Stats `json:"linkemAtEnd"`
	// Link samples the proxy's per-client downstream counters once per second.
	Link []LinkSample `json:"link"`
	// Server samples the broadcaster's view of its peers once per second (by slot: the server
	// does not know which bot a slot belongs to).
	Server []ServerSample   `json:"server"`
	Swarm  *botswarm.Report `json:"swarm"`
}

// LinkSample is the proxy's downstream counters of each proxied client at the end of second T.
type LinkSample struct {
	T       int          `json:"t"`
	Clients []LinkCounts `json:"clients"`
}

// LinkCounts are one client's downstream counters at linkem: what arrived from the server (what
// the server sent the client, its ENet traffic included) and what each impairment dropped.
type LinkCounts struct {
	ID             int    `json:"id"`
	BytesIn        uint64 `json:"bytesIn"`
	PacketsIn      uint64 `json:"packetsIn"`
	DroppedLoss    uint64 `json:"droppedLoss"`
	DroppedPolicer uint64 `json:"droppedPolicer"`
	DroppedQueue   uint64 `json:"droppedQueue"`
}

// ServerSample is the broadcaster's view at the end of second T: the ticks it ran in that second,
// how late the latest of them started, the longest one's work, how many ran in overload mode, and
// its peers.
type ServerSample struct {
	T               int                `json:"t"`
	Ticks           int                `json:"ticks"`
	MaxLateMs       float64            `json:"maxLateMs"`
	MaxWorkMs       float64            `json:"maxWorkMs"`
	OverloadedTicks int                `json:"overloadedTicks"`
	Peers           []netcode.PeerInfo `json:"peers"`
}

// What a second in which the server's tick loop kept time looks like (ServerSample.KeptTime).
const (
	KeptMinTicks = 55
	KeptMaxLate  = 50 * time.Millisecond
)

// KeptTime reports whether the server's tick loop kept time in the second: it ran at least
// KeptMinTicks ticks, none started more than KeptMaxLate late, and none in overload mode. A tick
// loop starved of CPU (a loaded machine) sends less to everyone and reads ACKs late, which the
// congestion controller cannot tell from loss, so such a second says little about the network.
func (s *ServerSample) KeptTime() bool {
	return s.Ticks >= KeptMinTicks && s.MaxLateMs <= ms(KeptMaxLate) && s.OverloadedTicks == 0
}

// Clients returns the bots of a class.
func (r *Result) Clients(class string) []botswarm.ClientReport {
	var out []botswarm.ClientReport
	for _, c := range r.Swarm.Clients {
		if c.Class == class {
			out = append(out, c)
		}
	}
	return out
}

// Window summarizes a class over the seconds [from, to).
func (r *Result) Window(class string, from, to int) botswarm.Summary {
	return botswarm.Summarize(r.Clients(class), from, to)
}

// ServerSecond returns the server sample of second t, if there is one.
func (r *Result) ServerSecond(t int) (ServerSample, bool) {
	for _, s := range r.Server {
		if s.T == t {
			return s, true
		}
	}
	return ServerSample{}, false
}

// ServerTicks is the number of ticks the server ran in second t of the run, -1 if unknown.
func (r *Result) ServerTicks(t int) int {
	if s, ok := r.ServerSecond(t); ok {
		return s.Ticks
	}
	return -1
}

// DemandMeasuredCleanly reports whether the server kept time (ServerSample.KeptTime) throughout
// the window the proxied clients' demand was measured in; if not, a loaded machine made the
// server send less than the clients need, and the caps and policers derived from it are too low.
func (r *Result) DemandMeasuredCleanly() bool {
	from := int((r.Options.Warmup - r.Options.DemandWindow) / time.Second)
	for t := from; t < r.ImpairFrom; t++ {
		if s, ok := r.ServerSecond(t); !ok || !s.KeptTime() {
			return false
		}
	}
	return true
}

// LinkemClient returns the proxy stats of a proxied bot at the end of the impairment.
func (r *Result) LinkemClient(c botswarm.ClientReport) (linkem.ClientStats, bool) {
	port, ok := localPort(c)
	if !ok {
		return linkem.ClientStats{}, false
	}
	for _, lc := range r.LinkemAtEnd.Clients {
		if lc.Addr.Port() == port {
			return lc, true
		}
	}
	return linkem.ClientStats{}, false
}

// LinkSecond returns bot id's downstream counters over second t (the difference between the
// samples at its end and the second before's); ok is false without both samples.
func (r *Result) LinkSecond(id, t int) (LinkCounts, bool) {
	var at, before *LinkCounts
	for i := range r.Link {
		s := &r.Link[i]
		if s.T != t && s.T != t-1 {
			continue
		}
		for j := range s.Clients {
			if s.Clients[j].ID == id {
				if s.T == t {
					at = &s.Clients[j]
				} else {
					before = &s.Clients[j]
				}
			}
		}
	}
	if at == nil || before == nil || at.BytesIn < before.BytesIn {
		return LinkCounts{}, false
	}
	return LinkCounts{
		ID: id, BytesIn: at.BytesIn - before.BytesIn, PacketsIn: at.PacketsIn - before.PacketsIn,
		DroppedLoss: at.DroppedLoss - before.DroppedLoss, DroppedPolicer: at.DroppedPolicer - before.DroppedPolicer,
		DroppedQueue: at.DroppedQueue - before.DroppedQueue,
	}, true
}
