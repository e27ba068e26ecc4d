package congestionlab

import (
	"math"

	"github.com/netfleet/netfleet/internal/botswarm"
)

// The reference targets of the congestion response, for a run with the controller enabled (and,
// for the queue, one with it disabled).
const (
	// LossyMaxHz within LossyBackoffSec of the impairment starting, and LossyRecoveredHz within
	// LossyRecoverySec of it ending.
	LossyMaxHz       = 30
	LossyBackoffSec  = 2
	LossyRecoveredHz = 55
	LossyRecoverySec = 5
	// CappedMaxQueueMs is the most the capped clients' queueing delay p95 may exceed their base
	// with the controller; CappedMinQueueMsOff the least it must reach without it (so the
	// scenario really congests the link).
	CappedMaxQueueMs    = 60
	CappedMinQueueMsOff = 150
	// CappedMaxHz is the most a capped client may be sent, as its median send rate over the
	// impairment from LossyBackoffSec after it started: backed off, well under 60 Hz.
	CappedMaxHz = 40
	// HealthyMinHz is the least median rate of the healthy clients in every second.
	HealthyMinHz = 59
)

// SettleSec is the start of the measured warm-up: the bots connect over the first second.
const SettleSec = 2

// Targets is a run measured against the reference targets.
type Targets struct {
	Lossy   LossyFigures   `json:"lossy"`
	Capped  CappedFigures  `json:"capped"`
	Healthy HealthyFigures `json:"healthy"`
}

// LossyFigures measure the lossy clients' back-off and recovery.
//
// The back-off is judged on the send rate averaged over two seconds: a client's per-second count
// of a 30 Hz stream is 29 or 31 when delivery jitter moves one frame across a second boundary,
// which the two-second mean cancels, while a climb back to 60 Hz for a few hundred milliseconds
// still shows in it.
type LossyFigures struct {
	// MaxSentHz is the highest two-second mean of the estimated send rate
	// (botswarm.Second.SentHz) of any lossy client, over the impairment from LossyBackoffSec
	// after it started; MaxSecondSentHz the highest single second.
	MaxSentHz       float64 `json:"maxSentHz"`
	MaxSecondSentHz float64 `json:"maxSecondSentHz"`
	// BackoffSec is, per client, how many seconds after the impairment started its two-second
	// mean send rate stayed at most LossyMaxHz for the rest of the impairment; -1 if it never did.
	BackoffSec []int `json:"backoffSec"`
	// RecoverySec is, per client, how many seconds after the impairment ended its rate stayed at
	// least LossyRecoveredHz for the rest of the run; -1 if it never did.
	RecoverySec []int `json:"recoverySec"`
	BackoffOK   bool  `json:"backoffOK"`
	RecoveryOK  bool  `json:"recoveryOK"`
}

// CappedFigures measure the capped clients' back-off and queueing delay. On loopback a
// snapshot's age is its one-way delay (one clock), so the queueing delay a capped client
// suffered is its snapshot age above its age before the impairment.
type CappedFigures struct {
	// SentHz is, per client, the median of its estimated send rate (botswarm.Second.SentHz)
	// over the impairment from LossyBackoffSec after it started; BackoffOK reports that each is
	// at most CappedMaxHz.
	SentHz    []float64 `json:"sentHz"`
	BackoffOK bool      `json:"backoffOK"`
	// BaseAgeMs is the capped class's median snapshot age in the warm-up.
	BaseAgeMs float64 `json:"baseAgeMs"`
	// AgeP95Ms is their snapshot-age p95 over the whole impairment, and SteadyAgeP95Ms over the
	// impairment after its first LossyBackoffSec seconds.
	AgeP95Ms       float64 `json:"ageP95Ms"`
	SteadyAgeP95Ms float64 `json:"steadyAgeP95Ms"`
	// QueueP95Ms is AgeP95Ms - BaseAgeMs; SteadyQueueP95Ms likewise.
	QueueP95Ms       float64 `json:"queueP95Ms"`
	SteadyQueueP95Ms float64 `json:"steadyQueueP95Ms"`
	// LinkAgeP5Ms is their snapshot-age p5 over the impairment: the delay of a capped path with
	// (almost) nothing queued, one packet's serialization at the capped rate; a thin cap makes it
	// tens of milliseconds. QueueP95AboveLinkMs is AgeP95Ms - LinkAgeP5Ms: the queueing on top.
	LinkAgeP5Ms         float64 `json:"linkAgeP5Ms"`
	QueueP95AboveLinkMs float64 `json:"queueP95AboveLinkMs"`
	// LinkemQueueP95Ms is linkem's queueing-delay p95 per client when the impairment ended (-1 if
	// linkem did not know the client). linkem
	// counts every packet since the client's first, the warm-up's (with no queue, 0) included,
	// so it understates the impairment's own p95.
	LinkemQueueP95Ms []float64 `json:"linkemQueueP95Ms"`
}

// HealthyFigures measure the healthy clients' rate.
type HealthyFigures struct {
	// MinMedianHz is the lowest per-second median rate of the healthy clients, from SettleSec on.
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
	var t Targets
	last := len(r.Swarm.Clients[0].Series) - 1 // the closing second is partial

	t.Lossy.BackoffOK, t.Lossy.RecoveryOK = true, true
	for _, c := range r.Clients(ClassLossy) {
		sent, got := make([]float64, len(c.Series)), make([]float64, len(c.Series))
		for s := range c.Series {
			sent[s], got[s] = c.Series[s].SentHz(), float64(c.Series[s].Hz)
		}
		m := MeasureLossy(sent, got, r.ImpairFrom, r.ImpairTo, last)
		t.Lossy.MaxSentHz = max(t.Lossy.MaxSentHz, m.MaxMeanHz)
		t.Lossy.MaxSecondSentHz = max(t.Lossy.MaxSecondSentHz, m.MaxSecondHz)
		t.Lossy.BackoffSec = append(t.Lossy.BackoffSec, m.BackoffSec)
		t.Lossy.RecoverySec = append(t.Lossy.RecoverySec, m.RecoverySec)
		t.Lossy.BackoffOK = t.Lossy.BackoffOK && m.BackoffSec >= 0 && m.BackoffSec <= LossyBackoffSec
		t.Lossy.RecoveryOK = t.Lossy.RecoveryOK && m.RecoverySec >= 0 && m.RecoverySec <= LossyRecoverySec
	}

	capped := r.Clients(ClassCapped)
	t.Capped.BaseAgeMs = botswarm.Summarize(capped, SettleSec, r.ImpairFrom).AgeP50Ms
	t.Capped.AgeP95Ms = botswarm.Summarize(capped, r.ImpairFrom, r.ImpairTo).AgeP95Ms
	t.Capped.SteadyAgeP95Ms = botswarm.Summarize(capped, r.ImpairFrom+LossyBackoffSec, r.ImpairTo).AgeP95Ms
	t.Capped.QueueP95Ms = t.Capped.AgeP95Ms - t.Capped.BaseAgeMs
	t.Capped.SteadyQueueP95Ms = t.Capped.SteadyAgeP95Ms - t.Capped.BaseAgeMs
	t.Capped.LinkAgeP5Ms = botswarm.AgeQuantile(capped, r.ImpairFrom, r.ImpairTo, 0.05)
	t.Capped.QueueP95AboveLinkMs = t.Capped.AgeP95Ms - t.Capped.LinkAgeP5Ms
	t.Capped.BackoffOK = true
	for _, c := range capped {
		m := sentHz(c, r.ImpairFrom+LossyBackoffSec, r.ImpairTo)
		t.Capped.SentHz = append(t.Capped.SentHz, m)
		t.Capped.BackoffOK = t.Capped.BackoffOK && m <= CappedMaxHz
		q := -1.0 // unknown
		if lc, ok := r.LinkemClient(c); ok {
			q = float64(lc.Down.QueueDelayP95.Microseconds()) / 1000
		}
		t.Capped.LinkemQueueP95Ms = append(t.Capped.LinkemQueueP95Ms, q)
	}

	healthy := r.Clients(ClassHealthy)
	t.Healthy.MinMedianHz = math.Inf(1)
	for s := SettleSec; s < last; s++ {
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

// ServerTicks is the number of ticks the server ran in second t of the run, -1 if unknown.
func (r *Result) ServerTicks(t int) int {
	if s, ok := r.ServerSecond(t); ok {
		return s.Ticks
	}
	return -1
}

// sentHz is the median of a client's estimated send rate (botswarm.Second.SentHz) over the
// seconds [from, to).
func sentHz(c botswarm.ClientReport, from, to int) float64 {
	var v []float64
	for s := from; s < to; s++ {
		v = append(v, c.Series[s].SentHz())
	}
	return botswarm.Median(v)
}

// LossyClient is one lossy client measured against the lossy targets.
type LossyClient struct {
	// MaxMeanHz is the highest two-second mean of its send rate over the impairment from
	// LossyBackoffSec after it started, MaxSecondHz the highest single second, MedianHz the
	// median second.
	MaxMeanHz, MaxSecondHz, MedianHz float64
	// BackoffSec is how many seconds after the impairment started the two-second mean send rate
	// stayed at most LossyMaxHz for the rest of the impairment; -1 if it did not hold at its end.
	BackoffSec int
	// RecoverySec is how many seconds after the impairment ended the received rate stayed at least
	// LossyRecoveredHz for the rest of the run; -1 if it did not hold at its end.
	RecoverySec int
}

// MeasureLossy measures a lossy client from its send rate and received rate in each second
// (sent[s] and got[s] for second s of the run), for an impairment over the seconds
// [impairFrom, impairTo) and a run whose seconds before end count. The window of a two-second
// mean starting at second s is [s, s+2), so the last one of the impairment starts two seconds
// before its end.
func MeasureLossy(sent, got []float64, impairFrom, impairTo, end int) LossyClient {
	var m LossyClient
	mean2 := func(s int) float64 { return (sent[s] + sent[s+1]) / 2 }
	var impaired []float64
	for s := impairFrom + LossyBackoffSec; s < impairTo; s++ {
		impaired = append(impaired, sent[s])
		m.MaxSecondHz = max(m.MaxSecondHz, sent[s])
		if s+1 < impairTo {
			m.MaxMeanHz = max(m.MaxMeanHz, mean2(s))
		}
	}
	m.MedianHz = botswarm.Median(impaired)
	m.BackoffSec = settledFrom(impairFrom, impairTo-1, func(s int) bool { return mean2(s) <= LossyMaxHz })
	m.RecoverySec = settledFrom(impairTo, end, func(s int) bool { return got[s] >= LossyRecoveredHz })
	return m
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
