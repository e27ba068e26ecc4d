package botswarm

import (
	"math"
	"slices"
	"time"
)

// Bot states, ClientReport.State.
const (
	StateConnecting = "connecting" // handshake not complete yet
	StateConnected  = "connected"  // session up
	StateDone       = "done"       // session up until the end of the run, then closed by the bot
	StateClosed     = "closed"     // the server closed the session (CloseCode says why) or it timed out
	StateRefused    = "refused"    // the server answered the connect with a disconnect
	StateTimeout    = "timeout"    // no handshake within the connect timeout
	StateError      = "error"      // a local ENet error ended the bot (Error says which)
)

// Report is the result of a swarm run, or a live view of one.
type Report struct {
	Server string    `json:"server"`
	Seed   uint64    `json:"seed"`
	Start  time.Time `json:"start"`
	// ElapsedMs is how long the swarm had run when the report was taken.
	ElapsedMs int64 `json:"elapsedMs"`
	// Classes summarizes every class over the full seconds of its clients.
	Classes []ClassReport  `json:"classes"`
	Clients []ClientReport `json:"clients"`
}

// ClassReport is a class's summary and its per-second series.
type ClassReport struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	// States counts the class's clients by state; CloseCodes counts the codes of sessions the
	// server closed.
	States     map[string]int    `json:"states"`
	CloseCodes map[uint32]int    `json:"closeCodes,omitempty"`
	Summary    Summary           `json:"summary"`
	Series     []ClassSecondStat `json:"series"`
}

// ClassSecondStat is one second of a class: the spread of its clients' figures in that second,
// over the clients connected for all of it.
type ClassSecondStat struct {
	T        int     `json:"t"`
	Clients  int     `json:"clients"`
	HzMedian float64 `json:"hzMedian"`
	HzMin    int     `json:"hzMin"`
	HzMax    int     `json:"hzMax"`
	KBps     float64 `json:"kBps"` // mean per client
	AgeP50Ms float64 `json:"ageP50Ms"`
	AgeP95Ms float64 `json:"ageP95Ms"`
}

// ClientReport is one bot's record.
type ClientReport struct {
	ID     int    `json:"id"`
	Class  string `json:"class"`
	Target string `json:"target"`
	// Local is the bot's socket address (with 0.0.0.0 when unbound: the port identifies it,
	// e.g. in a linkem proxy's per-client stats).
	Local string `json:"local"`
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// ConnectedMs and ClosedMs are when the handshake completed and when the session ended, in
	// ms from the swarm's start; -1 if not (yet).
	ConnectedMs int64 `json:"connectedMs"`
	ClosedMs    int64 `json:"closedMs"`
	// CloseCode is the ENet disconnect data of a session the server ended (protocol.Close*),
	// 0 for a timeout.
	CloseCode uint32  `json:"closeCode"`
	Totals    Totals  `json:"totals"`
	Summary   Summary `json:"summary"`
	// Series has one entry per second of the run, from the swarm's start.
	Series []Second `json:"series"`
}

// Totals are a bot's counters over its run.
type Totals struct {
	Snapshots        uint64 `json:"snapshots"` // distinct server ticks received
	Packets          uint64 `json:"packets"`   // SNAPSHOT packets applied
	Bytes            uint64 `json:"bytes"`     // bytes of every message received
	PacketsLost      uint64 `json:"packetsLost"`
	PacketsLate      uint64 `json:"packetsLate"` // arrived after a newer packet
	RecordsApplied   uint64 `json:"recordsApplied"`
	RecordsStale     uint64 `json:"recordsStale"`
	RecordsUnapplied uint64 `json:"recordsUnapplied"`
	Resets           uint64 `json:"resets"`
	BadMessages      uint64 `json:"badMessages"` // did not decode, or not a server message
	HellosSent       uint64 `json:"hellosSent"`
	AcksSent         uint64 `json:"acksSent"`
	PingsSent        uint64 `json:"pingsSent"`
	CommandsSent     uint64 `json:"commandsSent"`
	SendErrors       uint64 `json:"sendErrors"`
}

// Second is what a bot received in one second of the run.
type Second struct {
	T int `json:"t"` // seconds from the swarm's start
	// Full is true when the session was up for the whole second; summaries use only these.
	Full      bool    `json:"full"`
	Hz        int     `json:"hz"` // distinct server ticks received: the observed snapshot rate
	Packets   int     `json:"packets"`
	Bytes     int     `json:"bytes"`
	Lost      int     `json:"lost"` // packets missing from the server's sequence
	Applied   int     `json:"applied"`
	Unapplied int     `json:"unapplied"`
	AgeP50Ms  float64 `json:"ageP50Ms"` // -1 without packets
	AgeP95Ms  float64 `json:"ageP95Ms"`
	RTTMs     int64   `json:"rttMs"` // ENet's smoothed RTT at the end of the second
	Age       AgeHist `json:"-"`
}

// SentHz estimates the server's send rate in the second from what the client saw: the frames
// received plus the frames of the packets missing from the server's sequence, at the second's
// packets per frame (one, if nothing arrived). It differs from Hz only on a lossy path.
func (s *Second) SentHz() float64 {
	if s.Packets == 0 {
		return float64(s.Lost)
	}
	return float64(s.Hz) * float64(s.Packets+s.Lost) / float64(s.Packets)
}

// Summary condenses clients' full seconds within a window.
type Summary struct {
	// Clients is how many clients had at least one full second in the window; Seconds is the
	// number of (client, second) pairs.
	Clients int `json:"clients"`
	Seconds int `json:"seconds"`
	// HzMedian is the median over clients of each client's median per-second snapshot rate;
	// HzMin and HzMax are the extremes over every client and second.
	HzMedian float64 `json:"hzMedian"`
	HzMin    int     `json:"hzMin"`
	HzMax    int     `json:"hzMax"`
	// KBps is the mean received kilobytes (1000 bytes) per second per client.
	KBps float64 `json:"kBps"`
	// AgeP50Ms and AgeP95Ms are snapshot-age quantiles over every packet in the window.
	AgeP50Ms float64 `json:"ageP50Ms"`
	AgeP95Ms float64 `json:"ageP95Ms"`
	// AppliedPerSec is the mean of entity records applied per second per client: useful updates.
	AppliedPerSec float64 `json:"appliedPerSec"`
	// LossPct is packets lost over packets the server sent (received + lost), in percent.
	LossPct   float64 `json:"lossPct"`
	Unapplied int     `json:"unapplied"`
}

// Summarize condenses the full seconds in [from, to) of the given clients; to <= 0 means up to
// the end of the series.
func Summarize(clients []ClientReport, from, to int) Summary {
	var (
		s                                   Summary
		medians                             []float64
		hist                                ageTotal
		bytes, applied, packets, lost, secs float64
	)
	s.HzMin = math.MaxInt
	for i := range clients {
		var hz []float64
		w := window(clients[i].Series, from, to)
		for j := range w {
			sec := &w[j]
			if !sec.Full {
				continue
			}
			hz = append(hz, float64(sec.Hz))
			s.HzMin = min(s.HzMin, sec.Hz)
			s.HzMax = max(s.HzMax, sec.Hz)
			hist.merge(&sec.Age)
			bytes += float64(sec.Bytes)
			applied += float64(sec.Applied)
			packets += float64(sec.Packets)
			lost += float64(sec.Lost)
			s.Unapplied += sec.Unapplied
		}
		if len(hz) > 0 {
			s.Clients++
			s.Seconds += len(hz)
			secs += float64(len(hz))
			medians = append(medians, Median(hz))
		}
	}
	if s.Seconds == 0 {
		return Summary{AgeP50Ms: -1, AgeP95Ms: -1}
	}
	s.HzMedian = Median(medians)
	s.KBps = bytes / secs / 1000
	s.AppliedPerSec = applied / secs
	if packets+lost > 0 {
		s.LossPct = 100 * lost / (packets + lost)
	}
	s.AgeP50Ms = hist.quantile(0.50)
	s.AgeP95Ms = hist.quantile(0.95)
	return s
}

// AgeQuantile returns the snapshot age at quantile q over every packet the clients received in
// their full seconds within [from, to) (to <= 0: up to the end), in ms; -1 without packets.
func AgeQuantile(clients []ClientReport, from, to int, q float64) float64 {
	var hist ageTotal
	for i := range clients {
		w := window(clients[i].Series, from, to)
		for j := range w {
			if w[j].Full {
				hist.merge(&w[j].Age)
			}
		}
	}
	return hist.quantile(q)
}

// window returns the seconds of series with from <= T < to (to <= 0: no upper bound).
func window(series []Second, from, to int) []Second {
	lo := max(from, 0)
	hi := len(series)
	if to > 0 {
		hi = min(hi, to)
	}
	if lo >= hi {
		return nil
	}
	return series[lo:hi]
}

// Median returns the median of v (the mean of the middle two for an even count, 0 for none);
// v is left as it was.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}

// classSeries returns, per second, the spread over the clients connected for all of it.
func classSeries(clients []ClientReport, seconds int) []ClassSecondStat {
	out := make([]ClassSecondStat, seconds)
	secs := make([]*Second, 0, len(clients))
	for t := range out {
		secs = secs[:0]
		for i := range clients {
			if t < len(clients[i].Series) && clients[i].Series[t].Full {
				secs = append(secs, &clients[i].Series[t])
			}
		}
		out[t] = secondStat(t, secs)
	}
	return out
}

// secondStat condenses second t of several clients.
func secondStat(t int, secs []*Second) ClassSecondStat {
	st := ClassSecondStat{T: t, Clients: len(secs), AgeP50Ms: -1, AgeP95Ms: -1}
	if len(secs) == 0 {
		return st
	}
	var (
		hist  ageTotal
		bytes float64
	)
	hz := make([]float64, 0, len(secs))
	st.HzMin = math.MaxInt
	for _, sec := range secs {
		hz = append(hz, float64(sec.Hz))
		st.HzMin = min(st.HzMin, sec.Hz)
		st.HzMax = max(st.HzMax, sec.Hz)
		bytes += float64(sec.Bytes)
		hist.merge(&sec.Age)
	}
	st.HzMedian = Median(hz)
	st.KBps = bytes / float64(len(secs)) / 1000
	st.AgeP50Ms = hist.quantile(0.50)
	st.AgeP95Ms = hist.quantile(0.95)
	return st
}
