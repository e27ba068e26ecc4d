package congestionlab

import (
	"math"

	"github.com/netfleet/netfleet/internal/botswarm"
)

// The reference targets of the congestion response, for a run with the controller enabled (and,
// where stated, one with it disabled in the same benchmark).
const (
	// RandomMinUpdatesShare is the least share of the updates a random-loss class (lossy,
	// bursty) applies per second over the impairment without the controller that it must
	// apply with it: random loss is not congestion, and backing off for it costs updates.
	RandomMinUpdatesShare = 0.85
	// QueueMaxMs is the most a queueing class's queueing delay p95 may exceed its base with the
	// controller: the capped class's over the impairment, the lossy-capped and drop classes'
	// from SettleSec after their cap began. CappedMinQueueMsOff is the least the capped class's
	// must reach without it (so the scenario really congests the link).
	QueueMaxMs          = 60
	CappedMinQueueMsOff = 150
	// SettleSec is how long a back-off may take: the figures of a steady impaired state start
	// this long after the impairment (the drop class: its cap) began.
	SettleSec = 2
	// CappedMaxHz is the most a capped client may be sent, as its median send rate from
	// SettleSec into the impairment: backed off, well under 60 Hz.
	CappedMaxHz = 40
	// PolicedBackoffSec is how soon after the impairment started a policed client must be sent
	// at most PolicedMaxShare of what its policer passes, on average from then on, in bytes at
	// linkem. The policer counts every byte of the client's UDP stream, ENet's own headers, pings
	// and acknowledgements included, which the controller does not pace: on a thin client they
	// are a tenth or so of it. Without the controller a policed client is sent 1.6 to 1.9 times
	// what its policer passes.
	PolicedBackoffSec = 2
	PolicedMaxShare   = 1.25
	// RecoveredHz within RecoverySec of the impairment ending, for every impaired client.
	RecoveredHz = 55
	RecoverySec = 5
	// HealthyMinHz is the least median rate of the healthy clients in every second.
	HealthyMinHz = 59
)

// WarmupFrom is the start of the measured warm-up: the bots connect over the first second.
const WarmupFrom = 2

// Targets is a run measured against the reference targets.
type Targets struct {
	Lossy       RandomLossFigures `json:"lossy"`
	Bursty      RandomLossFigures `json:"bursty"`
	Capped      QueueFigures      `json:"capped"`
	LossyCapped QueueFigures      `json:"lossyCapped"`
	Drop        QueueFigures      `json:"drop"`
	Policed     PolicedFigures    `json:"policed"`
	// RecoverySec is, per impaired class and client, how many seconds after the impairment
	// ended its received rate stayed at least RecoveredHz for the rest of the run; -1 if it did
	// not hold at the end. RecoveryOK reports that every one is at most RecoverySec.
	RecoverySec map[string][]int `json:"recoverySec"`
	RecoveryOK  bool             `json:"recoveryOK"`
	Healthy     HealthyFigures   `json:"healthy"`
}

// RandomLossFigures measure a class whose loss is random over the impairment: how many updates
// its clients applied, how often they were sent, and what they lost.
type RandomLossFigures struct {
	Clients int `json:"clients"`
	// AppliedPerSec is the mean updates (entity records) a client applied per second over the
	// impairment; the benchmark compares it with the run without the controller.
	AppliedPerSec float64 `json:"appliedPerSec"`
	// SentHz is, per client, the median estimated send rate (botswarm.Second.SentHz) from
	// SettleSec into the impairment.
	SentHz []float64 `json:"sentHz"`
	// LossPct is the class's packet loss over the impairment.
	LossPct float64 `json:"lossPct"`
}

// QueueFigures measure a class whose path queues from its onset (the impairment's start, or the
// drop class's cap) to the end of the impairment. On loopback a snapshot's age is its one-way
// delay (one clock), so the queueing delay a client suffered is its snapshot age above its age
// before the impairment.
type QueueFigures struct {
	Clients int `json:"clients"`
	// Onset is the second the queueing began.
	Onset int `json:"onset"`
	// SentHz is, per client, the median of its estimated send rate from SettleSec after the
	// onset; BackoffOK reports that each is at most CappedMaxHz.
	SentHz    []float64 `json:"sentHz"`
	BackoffOK bool      `json:"backoffOK"`
	// BaseAgeMs is the class's median snapshot age in the warm-up.
	BaseAgeMs float64 `json:"baseAgeMs"`
	// AgeP95Ms is their snapshot-age p95 from the onset to the end of the impairment, and
	// SteadyAgeP95Ms from SettleSec after the onset.
	AgeP95Ms       float64 `json:"ageP95Ms"`
	SteadyAgeP95Ms float64 `json:"steadyAgeP95Ms"`
	// QueueP95Ms is AgeP95Ms - BaseAgeMs; SteadyQueueP95Ms likewise.
	QueueP95Ms       float64 `json:"queueP95Ms"`
	SteadyQueueP95Ms float64 `json:"steadyQueueP95Ms"`
	// LinkAgeP5Ms is their snapshot-age p5 over the same seconds: the delay of a capped path
	// with (almost) nothing queued, one packet's serialization at the capped rate; a thin cap
	// makes it tens of milliseconds. QueueP95AboveLinkMs is AgeP95Ms - LinkAgeP5Ms: the
	// queueing on top.
	LinkAgeP5Ms         float64 `json:"linkAgeP5Ms"`
	QueueP95AboveLinkMs float64 `json:"queueP95AboveLinkMs"`
	// LinkemQueueP95Ms is linkem's queueing-delay p95 per client when the impairment ended (-1
	// if linkem did not know the client). linkem counts every packet since the client's first,
	// the warm-up's (with no queue, 0) included, so it understates the impairment's own p95.
	LinkemQueueP95Ms []float64 `json:"linkemQueueP95Ms"`
}

// PolicedFigures measure the policed clients: how soon they were sent no more than their
// policer passes, and how much of it they were sent after.
type PolicedFigures struct {
	Clients int `json:"clients"`
	// BackoffSec is, per client, how many seconds after the impairment started the bytes the
	// server sent it (at linkem) were, on average from then to the end of the impairment, at
	// most PolicedMaxShare of its policer's rate; -1 if never. BackoffOK reports that each is
	// at most PolicedBackoffSec.
	BackoffSec []int `json:"backoffSec"`
	BackoffOK  bool  `json:"backoffOK"`
	// SentShare is, per client, the bytes it was sent per second from SettleSec into the
	// impairment over its policer's rate, and DroppedPct the share of its packets the policer
	// dropped then.
	SentShare  []float64 `json:"sentShare"`
	DroppedPct []float64 `json:"droppedPct"`
}

// HealthyFigures measure the healthy clients' rate.
type HealthyFigures struct {
	// MinMedianHz is the lowest per-second median rate of the healthy clients, from WarmupFrom on.
	MinMedianHz float64 `json:"minMedianHz"`
	// Below lists the seconds whose median was under HealthyMinHz, with the ticks the server ran
	// in them: a tick loop that fell behind (machine load) sends fewer frames to everyone.
	Below []HealthySecond `json:"below"`
}

// HealthySecond is a second in which the healthy clients' median rate was under HealthyMinHz.
type HealthySecond struct {
	T           int     `json:"t"`
	MedianHz    float64 `json:"medianHz"`
	ServerTicks int     `json:"serverTicks"`
}

// Measure measures a run against the reference targets.
func (r *Result) Measure() Targets {
	t := Targets{RecoverySec: map[string][]int{}, RecoveryOK: true}
	last := len(r.Swarm.Clients[0].Series) - 1 // the closing second is partial

	t.Lossy = r.randomLoss(ClassLossy)
	t.Bursty = r.randomLoss(ClassBursty)
	t.Capped = r.queueing(ClassCapped, r.ImpairFrom)
	t.LossyCapped = r.queueing(ClassLossyCapped, r.ImpairFrom)
	t.Drop = r.queueing(ClassDrop, r.DropFrom)
	t.Policed = r.policed()

	for _, class := range ImpairedClasses {
		for _, c := range r.Clients(class) {
			got := make([]float64, len(c.Series))
			for s := range c.Series {
				got[s] = float64(c.Series[s].Hz)
			}
			sec := settledFrom(r.ImpairTo, last, func(s int) bool { return got[s] >= RecoveredHz })
			t.RecoverySec[class] = append(t.RecoverySec[class], sec)
			t.RecoveryOK = t.RecoveryOK && sec >= 0 && sec <= RecoverySec
		}
	}

	healthy := r.Clients(ClassHealthy)
	t.Healthy.MinMedianHz = math.Inf(1)
	for s := WarmupFrom; s < last; s++ {
		var hz []float64
		for _, c := range healthy {
			if c.Series[s].Full {
				hz = append(hz, float64(c.Series[s].Hz))
			}
		}
		m := botswarm.Median(hz)
		t.Healthy.MinMedianHz = min(t.Healthy.MinMedianHz, m)
		if m < HealthyMinHz {
			t.Healthy.Below = append(t.Healthy.Below, HealthySecond{T: s, MedianHz: m, ServerTicks: r.ServerTicks(s)})
		}
	}
	return t
}

func (r *Result) randomLoss(class string) RandomLossFigures {
	clients := r.Clients(class)
	f := RandomLossFigures{Clients: len(clients)}
	if len(clients) == 0 {
		return f
	}
	w := botswarm.Summarize(clients, r.ImpairFrom, r.ImpairTo)
	f.AppliedPerSec, f.LossPct = w.AppliedPerSec, w.LossPct
	for _, c := range clients {
		f.SentHz = append(f.SentHz, sentHz(c, r.ImpairFrom+SettleSec, r.ImpairTo))
	}
	return f
}

func (r *Result) queueing(class string, onset int) QueueFigures {
	clients := r.Clients(class)
	f := QueueFigures{Clients: len(clients), Onset: onset, BackoffOK: true}
	if len(clients) == 0 {
		return f
	}
	f.BaseAgeMs = botswarm.Summarize(clients, WarmupFrom, r.ImpairFrom).AgeP50Ms
	f.AgeP95Ms = botswarm.Summarize(clients, onset, r.ImpairTo).AgeP95Ms
	f.SteadyAgeP95Ms = botswarm.Summarize(clients, onset+SettleSec, r.ImpairTo).AgeP95Ms
	f.QueueP95Ms = f.AgeP95Ms - f.BaseAgeMs
	f.SteadyQueueP95Ms = f.SteadyAgeP95Ms - f.BaseAgeMs
	f.LinkAgeP5Ms = botswarm.AgeQuantile(clients, onset, r.ImpairTo, 0.05)
	f.QueueP95AboveLinkMs = f.AgeP95Ms - f.LinkAgeP5Ms
	for _, c := range clients {
		m := sentHz(c, onset+SettleSec, r.ImpairTo)
		f.SentHz = append(f.SentHz, m)
		f.BackoffOK = f.BackoffOK && m <= CappedMaxHz
		q := -1.0 // unknown
		if lc, ok := r.LinkemClient(c); ok {
			q = float64(lc.Down.QueueDelayP95.Microseconds()) / 1000
		}
		f.LinkemQueueP95Ms = append(f.LinkemQueueP95Ms, q)
	}
	return f
}

func (r *Result) policed() PolicedFigures {
	clients := r.Clients(ClassPoliced)
	f := PolicedFigures{Clients: len(clients), BackoffOK: true}
	for _, c := range clients {
		limit := float64(r.Limit[c.ID])
		backoff := -1
		var sent, in, dropped, rest float64
		secs := 0
		for s := r.ImpairTo - 1; s >= r.ImpairFrom; s-- {
			lc, ok := r.LinkSecond(c.ID, s)
			if !ok {
				continue
			}
			rest += float64(lc.BytesIn)
			secs++
			if rest <= PolicedMaxShare*limit*float64(secs) {
				backoff = s - r.ImpairFrom
			}
			if s >= r.ImpairFrom+SettleSec {
				sent += float64(lc.BytesIn)
				in += float64(lc.PacketsIn)
				dropped += float64(lc.DroppedPolicer)
			}
		}
		steady := float64(r.ImpairTo - r.ImpairFrom - SettleSec)
		f.BackoffSec = append(f.BackoffSec, backoff)
		f.BackoffOK = f.BackoffOK && backoff >= 0 && backoff <= PolicedBackoffSec
		f.SentShare = append(f.SentShare, share(sent/steady, limit))
		f.DroppedPct = append(f.DroppedPct, 100*share(dropped, in))
	}
	return f
}

func share(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// sentHz is the median of a client's estimated send rate (botswarm.Second.SentHz) over the
// seconds [from, to).
func sentHz(c botswarm.ClientReport, from, to int) float64 {
	var v []float64
	for s := from; s < min(to, len(c.Series)); s++ {
		v = append(v, c.Series[s].SentHz())
	}
	return botswarm.Median(v)
}

// settledFrom returns how many seconds after from the condition held for every second up to
// (not including) to, or -1 if it did not hold in the last one.
func settledFrom(from, to int, ok func(s int) bool) int {
	at := -1
	for s := to - 1; s >= from; s-- {
		if !ok(s) {
			break
		}
		at = s - from
	}
	return at
}
