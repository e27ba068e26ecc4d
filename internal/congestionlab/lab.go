// Package congestionlab runs netfleet's congestion-response scenario on one machine: a game
// server's broadcaster in process on 127.0.0.1, two linkem proxies in front of it, and three
// classes of real ENet bots — healthy (direct), lossy (through a proxy that adds loss and delay
// while the impairment lasts) and capped (through a proxy that caps each client's downstream at a
// fraction of the rate it was measured to need, with a finite queue). The impairment starts after a
// warm-up, lasts a while and is removed again, so the result shows the back-off, the steady
// impaired state and the recovery, per client and per second.
//
// The congestion test (test/e2e) and the congestion benchmark (hack/bench-congestion) both run it;
// they judge the result by what the clients observed (internal/botswarm) and by linkem's per-client
// counters.
//
// It is a test and benchmark tool: nothing in the game server or the operator imports it.
package congestionlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/linkem"
)

// Class names of the scenario's bots.
const (
	ClassHealthy = "healthy"
	ClassLossy   = "lossy"
	ClassCapped  = "capped"
)

// Options shape a scenario run. DefaultOptions gives the reference scenario.
type Options struct {
	// Healthy, Lossy and Capped are the bots per class.
	Healthy, Lossy, Capped int
	// Warmup runs clean; the impairment then lasts Impaired; Recovery runs clean again. All are
	// whole seconds, so phases align with the bots' per-second series.
	Warmup, Impaired, Recovery time.Duration
	// DemandWindow is the end of the warm-up over which each capped client's downstream demand is
	// measured at linkem.
	DemandWindow time.Duration
	// LossRatio and DelayMs impair the lossy class's downstream.
	LossRatio float64
	DelayMs   float64
	// CapRatio caps each capped client's downstream at this fraction of its measured demand, with
	// a bottleneck queue of QueueMs.
	CapRatio float64
	QueueMs  float64
	// Netcode is the server's netcode config; absent fields take their defaults.
	// ControllerEnabled overrides its congestion.enabled.
	Netcode netcode.NetcodeConfig
	// ControllerEnabled is the netcode congestion.enabled of the server.
	ControllerEnabled bool
	// Population is the number of moving entities in the demo world.
	Population int
	// Seed seeds the world, linkem and the bots.
	Seed uint64
	// Nice, if negative, is the scheduling niceness the run asks for, for every thread of the
	// process, where the privilege allows (Linux, root or CAP_SYS_NICE). The scenario measures
	// the response to the network; on a shared, loaded machine a server or bot starved of CPU
	// would otherwise look like a congested link (late ACKs read as loss). Without the
	// privilege the run goes on at normal priority.
	Nice int
	// Progress, if set, is called about once per second with the swarm's progress and the phase.
	Progress func(p botswarm.Progress, phase string) `json:"-"`
}

// DefaultOptions is the reference scenario: 8 healthy, 4 lossy (5% loss, 80 ms delay) and 4
// capped clients (half their demand, 200 ms queue); 6 s warm-up, 12 s impaired, 10 s recovery.
func DefaultOptions() Options {
	return Options{
		Healthy: 8, Lossy: 4, Capped: 4,
		Warmup: 6 * time.Second, Impaired: 12 * time.Second, Recovery: 10 * time.Second,
		DemandWindow: 3 * time.Second,
		LossRatio:    0.05, DelayMs: 80,
		CapRatio: 0.5, QueueMs: 200,
		ControllerEnabled: true,
		Population:        2000,
		Seed:              1,
		Nice:              -10,
	}
}

func (o *Options) validate() error {
	whole := func(d time.Duration) bool { return d > 0 && d%time.Second == 0 }
	switch {
	case o.Healthy < 1 || o.Lossy < 1 || o.Capped < 1:
		return errors.New("congestionlab: every class needs at least one bot")
	case !whole(o.Warmup) || !whole(o.Impaired) || !whole(o.Recovery):
		return errors.New("congestionlab: phases must be whole, positive seconds")
	case o.DemandWindow <= 0 || o.DemandWindow >= o.Warmup:
		return fmt.Errorf("congestionlab: demand window %v must be within the warm-up %v", o.DemandWindow, o.Warmup)
	case o.CapRatio <= 0 || o.CapRatio > 1:
		return fmt.Errorf("congestionlab: cap ratio %v out of range (0, 1]", o.CapRatio)
	case o.Population < 1:
		return errors.New("congestionlab: the world needs a population")
	}
	return nil
}

// Result is what one run observed.
type Result struct {
	Options Options `json:"options"`
	// ImpairFrom and ImpairTo bound the impairment in seconds of the bots' series: it applies in
	// [ImpairFrom, ImpairTo).
	ImpairFrom int `json:"impairFrom"`
	ImpairTo   int `json:"impairTo"`
	// Demand is each capped client's measured downstream demand before the impairment, in UDP
	// payload bytes per second at linkem, and Cap the rate it was capped at; keyed by bot id.
	Demand map[int]float64 `json:"demand"`
	Cap    map[int]int64   `json:"cap"`
	// LinkemAtEnd are the proxies' per-client stats when the impairment ended, before the profiles
	// were cleared: their queueing delays cover the run up to that moment.
	LossyLinkem  linkem.Stats `json:"lossyLinkem"`
	CappedLinkem linkem.Stats `json:"cappedLinkem"`
	// Server samples the broadcaster's view of its peers once per second (by slot: the server
	// does not know which bot a slot belongs to).
	Server []ServerSample   `json:"server"`
	Swarm  *botswarm.Report `json:"swarm"`
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

// DemandMeasuredCleanly reports whether the server kept time (ServerSample.KeptTime) throughout
// the window the capped clients' demand was measured in; if not, a loaded machine made the server
// send less than the clients need, and the caps derived from it are too low.
func (r *Result) DemandMeasuredCleanly() bool {
	from := int((r.Options.Warmup - r.Options.DemandWindow) / time.Second)
	for t := from; t < r.ImpairFrom; t++ {
		if s, ok := r.ServerSecond(t); !ok || !s.KeptTime() {
			return false
		}
	}
	return true
}

// LinkemClient returns the proxy stats of a bot (lossy or capped) at the end of the impairment.
func (r *Result) LinkemClient(c botswarm.ClientReport) (linkem.ClientStats, bool) {
	st := r.LossyLinkem
	if c.Class == ClassCapped {
		st = r.CappedLinkem
	}
	port, ok := localPort(c)
	if !ok {
		return linkem.ClientStats{}, false
	}
	for _, lc := range st.Clients {
		if lc.Addr.Port() == port {
			return lc, true
		}
	}
	return linkem.ClientStats{}, false
}

func localPort(c botswarm.ClientReport) (uint16, bool) {
	ap, err := netip.ParseAddrPort(c.Local)
	if err != nil {
		return 0, false
	}
	return ap.Port(), true
}

// Run runs the scenario and returns what it observed.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Nice < 0 {
		// Best effort: the figures stand either way, they are only noisier without it.
		_ = boostPriority(o.Nice)
	}
	nc := *o.Netcode.DeepCopy()
	nc.Congestion.Enabled = &o.ControllerEnabled
	var ticks tickWatch
	g, err := demo.NewGame(demo.GameConfig{World: demo.Config{Seed: o.Seed, Population: o.Population}})
	if err != nil {
		return nil, fmt.Errorf("congestionlab: %w", err)
	}
	resolved, err := netcode.Resolve(nc)
	if err != nil {
		return nil, fmt.Errorf("congestionlab: %w", err)
	}
	srv, err := broadcast.New(broadcast.Options{
		Address: netip.MustParseAddrPort("127.0.0.1:0"),
		Game:    g,
		Store:   g.Store(),
		Netcode: resolved,
		OnTick:  ticks.observe,
	})
	if err != nil {
		return nil, fmt.Errorf("congestionlab: %w", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run() }()
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(stopCtx)
	}()

	lossy, err := newProxy(srv.Address(), o.Seed)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lossy.Close() }()
	capped, err := newProxy(srv.Address(), o.Seed+1)
	if err != nil {
		return nil, err
	}
	defer func() { _ = capped.Close() }()

	total := o.Warmup + o.Impaired + o.Recovery
	swarm, err := botswarm.New(botswarm.Config{
		Server: srv.Address(),
		Classes: []botswarm.Class{
			{Name: ClassHealthy, Count: o.Healthy},
			{Name: ClassLossy, Count: o.Lossy, Addr: lossy.Addr()},
			{Name: ClassCapped, Count: o.Capped, Addr: capped.Addr()},
		},
		Duration: total,
		// Connect one at a time; the server's per-source connect limiter admits a burst of 20.
		Ramp: time.Second,
		Seed: o.Seed,
	})
	if err != nil {
		return nil, fmt.Errorf("congestionlab: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := swarm.Start(runCtx); err != nil {
		return nil, fmt.Errorf("congestionlab: %w", err)
	}
	if o.Nice < 0 {
		_ = boostPriority(o.Nice) // the bots' threads, if any were created from unboosted ones
	}
	l := &lab{o: o, srv: srv, ticks: &ticks, lossy: lossy, capped: capped, swarm: swarm, start: swarm.StartTime(), lastTick: srv.Tick()}
	res := &Result{
		Options:    o,
		ImpairFrom: int(o.Warmup / time.Second),
		ImpairTo:   int((o.Warmup + o.Impaired) / time.Second),
	}
	err = l.timeline(runCtx, res)
	if err != nil {
		cancel()
	}
	res.Swarm = swarm.Wait()
	select {
	case rerr := <-runErr:
		if rerr != nil {
			return nil, fmt.Errorf("congestionlab: server: %w", rerr)
		}
	default:
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func newProxy(server netip.AddrPort, seed uint64) (*linkem.Proxy, error) {
	p, err := linkem.New(linkem.Config{Listen: "127.0.0.1:0", Upstream: server.String(), Seed: seed})
	if err != nil {
		return nil, fmt.Errorf("congestionlab: linkem: %w", err)
	}
	return p, nil
}

// lab is one run in progress.
type lab struct {
	o             Options
	srv           *broadcast.Broadcaster
	ticks         *tickWatch
	lossy, capped *linkem.Proxy
	swarm         *botswarm.Swarm
	start         time.Time
	lastTick      uint64 // the server's tick count at the last sample
}

// timeline waits through the phases, measuring demand, applying and clearing the impairment, and
// sampling the server every second.
func (l *lab) timeline(ctx context.Context, res *Result) error {
	at := func(d time.Duration) time.Time { return l.start.Add(d) }
	demandFrom := l.o.Warmup - l.o.DemandWindow

	if err := l.until(ctx, at(demandFrom), "warm-up", res); err != nil {
		return err
	}
	before := l.capped.Stats()
	t0 := time.Now()
	if err := l.until(ctx, at(l.o.Warmup), "warm-up", res); err != nil {
		return err
	}
	after := l.capped.Stats()
	elapsed := time.Since(t0).Seconds()
	res.Demand, res.Cap = map[int]float64{}, map[int]int64{}
	byPort := l.botsByPort()
	for _, c := range after.Clients {
		id, ok := byPort[c.Addr.Port()]
		if !ok {
			continue
		}
		var prev uint64
		for _, b := range before.Clients {
			if b.Addr == c.Addr {
				prev = b.Down.BytesIn
			}
		}
		demand := float64(c.Down.BytesIn-prev) / elapsed
		res.Demand[id] = demand
		res.Cap[id] = max(int64(demand*l.o.CapRatio), 1)
		prof := linkem.Profile{Down: linkem.Impairment{RateBytesPerSec: res.Cap[id], QueueMs: l.o.QueueMs}}
		if err := l.capped.SetProfile(linkem.AddrSelector(c.Addr), prof); err != nil {
			return fmt.Errorf("congestionlab: cap client %d: %w", id, err)
		}
	}
	if len(res.Demand) != l.o.Capped {
		return fmt.Errorf("congestionlab: measured the demand of %d capped clients of %d (not all connected)", len(res.Demand), l.o.Capped)
	}
	lossProf := linkem.Profile{Down: linkem.Impairment{Loss: l.o.LossRatio, DelayMs: l.o.DelayMs}}
	if err := l.lossy.SetProfile(linkem.DefaultSelector(), lossProf); err != nil {
		return fmt.Errorf("congestionlab: impair: %w", err)
	}

	if err := l.until(ctx, at(l.o.Warmup+l.o.Impaired), "impaired", res); err != nil {
		return err
	}
	res.LossyLinkem, res.CappedLinkem = l.lossy.Stats(), l.capped.Stats()
	if err := l.lossy.SetProfile(linkem.DefaultSelector(), linkem.Profile{}); err != nil {
		return fmt.Errorf("congestionlab: clear: %w", err)
	}
	for _, c := range res.CappedLinkem.Clients {
		if err := l.capped.ResetProfile(linkem.AddrSelector(c.Addr)); err != nil && !errors.Is(err, linkem.ErrNoOverride) {
			return fmt.Errorf("congestionlab: clear: %w", err)
		}
	}
	return l.until(ctx, at(l.o.Warmup+l.o.Impaired+l.o.Recovery), "recovery", res)
}

// until waits for t, sampling the server and reporting progress at every whole second.
func (l *lab) until(ctx context.Context, t time.Time, phase string, res *Result) error {
	for {
		now := time.Now()
		if !now.Before(t) {
			return nil
		}
		sec := int(now.Sub(l.start) / time.Second)
		next := earlier(t, l.start.Add(time.Duration(sec+1)*time.Second))
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("congestionlab: %s: %w", phase, ctx.Err())
		case <-timer.C:
		}
		tick := l.srv.Tick()
		late, work, overloaded := l.ticks.take()
		res.Server = append(res.Server, ServerSample{
			T: sec, Ticks: int(tick - l.lastTick), MaxLateMs: ms(late), MaxWorkMs: ms(work), OverloadedTicks: overloaded,
			Peers: l.srv.Peers(nil),
		})
		l.lastTick = tick
		if l.o.Progress != nil {
			l.o.Progress(l.swarm.Progress(), phase)
		}
	}
}

// botsByPort maps the bots' local ports to their ids.
func (l *lab) botsByPort() map[uint16]int {
	out := map[uint16]int{}
	for _, c := range l.swarm.Report().Clients {
		if port, ok := localPort(c); ok {
			out[port] = c.ID
		}
	}
	return out
}

// tickWatch keeps the largest lateness and work of the server's ticks, and the number run in
// overload mode, since it was last taken. observe runs on the tick goroutine, take on the lab's.
type tickWatch struct {
	late, work, overloaded atomic.Int64
}

func (w *tickWatch) observe(st broadcast.TickStats) {
	raise(&w.late, int64(st.Late))
	raise(&w.work, int64(st.Work))
	if st.Overloaded {
		w.overloaded.Add(1)
	}
}

func raise(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

func (w *tickWatch) take() (late, work time.Duration, overloaded int) {
	return time.Duration(w.late.Swap(0)), time.Duration(w.work.Swap(0)), int(w.overloaded.Swap(0))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
