// Package congestionlab runs netfleet's congestion-response scenario on one machine: a game
// server's broadcaster in process on 127.0.0.1, a linkem proxy in front of it, and classes of
// real ENet bots — healthy (direct) and six impaired ones, each client's path impaired on its own
// through the proxy while the impairment lasts:
//
//   - lossy: random loss and added delay (a radio link, or a longer path): not congestion;
//   - bursty: loss in bursts (a Gilbert-Elliott model): not congestion;
//   - capped: a bandwidth cap at a fraction of the rate the client was measured to need, with a
//     finite queue: congestion that queues;
//   - lossy-capped: the cap and random loss together;
//   - policed: a policer at a fraction of that rate, which drops what exceeds it and queues
//     nothing: congestion that loses;
//   - drop: clean until halfway through the impairment, then capped as the capped class.
//
// The impairment starts after a warm-up, lasts a while and is removed again, so the result shows
// the response, the steady impaired state and the recovery, per client and per second.
//
// The congestion test and the congestion benchmark (hack/bench-congestion) both run it; they
// judge the result by what the clients observed (internal/botswarm) and by linkem's per-client
// counters, sampled every second.
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
	ClassHealthy     = "healthy"
	ClassLossy       = "lossy"
	ClassBursty      = "bursty"
	ClassCapped      = "capped"
	ClassLossyCapped = "lossy-capped"
	ClassPoliced     = "policed"
	ClassDrop        = "drop"
)

// Classes are the scenario's classes in report order; ImpairedClasses those through the proxy.
var (
	Classes         = []string{ClassHealthy, ClassLossy, ClassBursty, ClassCapped, ClassLossyCapped, ClassPoliced, ClassDrop}
	ImpairedClasses = Classes[1:]
)

// Options shape a scenario run. DefaultOptions gives the reference scenario.
type Options struct {
	// Bots is the number of bots per class (Classes); a class left out or at 0 has none, but
	// healthy, lossy and capped need one at least.
	Bots map[string]int
	// Warmup runs clean; the impairment then lasts Impaired; Recovery runs clean again. All are
	// whole seconds, so phases align with the bots' per-second series.
	Warmup, Impaired, Recovery time.Duration
	// DemandWindow is the end of the warm-up over which each proxied client's downstream demand
	// is measured at linkem: the rate the caps and the policer are fractions of.
	DemandWindow time.Duration
	// LossRatio and DelayMs impair the lossy class's downstream; LossRatio alone the
	// lossy-capped class's, besides its cap.
	LossRatio float64
	DelayMs   float64
	// BurstLossRatio is the bursty class's long-run loss, in bursts of BurstLen packets on
	// average.
	BurstLossRatio float64
	BurstLen       float64
	// CapRatio caps the capped, lossy-capped and drop clients' downstream at this fraction of
	// their measured demand, with a bottleneck queue of QueueMs. The drop class is capped from
	// DropAfter into the impairment.
	CapRatio  float64
	QueueMs   float64
	DropAfter time.Duration
	// PolicerRatio polices the policed clients' downstream at this fraction of their measured
	// demand, with linkem's default bucket.
	PolicerRatio float64
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

// DefaultOptions is the reference scenario: 8 healthy clients, 4 lossy (5% loss, 80 ms added),
// 4 capped (half their demand, 200 ms queue) and 2 of each other class (bursty: 5% in bursts of
// 4 packets; lossy-capped: 5% loss and the cap; policed: 60% of their demand; drop: the cap from
// 6 s into the impairment); 6 s warm-up, 12 s impaired, 10 s recovery. 24 clients and the server
// share two cores with the benchmark's other work: more would starve the tick loop now and then.
func DefaultOptions() Options {
	return Options{
		Bots: map[string]int{
			ClassHealthy: 8, ClassLossy: 4, ClassCapped: 4,
			ClassBursty: 2, ClassLossyCapped: 2, ClassPoliced: 2, ClassDrop: 2,
		},
		Warmup: 6 * time.Second, Impaired: 12 * time.Second, Recovery: 10 * time.Second,
		DemandWindow: 3 * time.Second,
		LossRatio:    0.05, DelayMs: 80,
		BurstLossRatio: 0.05, BurstLen: 4,
		CapRatio: 0.5, QueueMs: 200, DropAfter: 6 * time.Second,
		PolicerRatio:      0.6,
		ControllerEnabled: true,
		Population:        2000,
		Seed:              1,
		Nice:              -10,
	}
}

func (o *Options) validate() error {
	whole := func(d time.Duration) bool { return d > 0 && d%time.Second == 0 }
	for class, n := range o.Bots {
		if n < 0 || !isClass(class) {
			return fmt.Errorf("congestionlab: %d bots of class %q", n, class)
		}
	}
	switch {
	case o.Bots[ClassHealthy] < 1 || o.Bots[ClassLossy] < 1 || o.Bots[ClassCapped] < 1:
		return errors.New("congestionlab: the healthy, lossy and capped classes need at least one bot each")
	case !whole(o.Warmup) || !whole(o.Impaired) || !whole(o.Recovery):
		return errors.New("congestionlab: phases must be whole, positive seconds")
	case o.DemandWindow <= 0 || o.DemandWindow >= o.Warmup:
		return fmt.Errorf("congestionlab: demand window %v must be within the warm-up %v", o.DemandWindow, o.Warmup)
	case o.CapRatio <= 0 || o.CapRatio > 1 || o.PolicerRatio <= 0 || o.PolicerRatio > 1:
		return fmt.Errorf("congestionlab: cap ratio %v or policer ratio %v out of range (0, 1]", o.CapRatio, o.PolicerRatio)
	case !whole(o.DropAfter) || o.DropAfter >= o.Impaired:
		return fmt.Errorf("congestionlab: drop after %v must be whole seconds within the impairment %v", o.DropAfter, o.Impaired)
	case o.Population < 1:
		return errors.New("congestionlab: the world needs a population")
	}
	return nil
}

func isClass(name string) bool {
	for _, c := range Classes {
		if c == name {
			return true
		}
	}
	return false
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

	proxy, err := linkem.New(linkem.Config{Listen: "127.0.0.1:0", Upstream: srv.Address().String(), Seed: o.Seed})
	if err != nil {
		return nil, fmt.Errorf("congestionlab: linkem: %w", err)
	}
	defer func() { _ = proxy.Close() }()

	total := o.Warmup + o.Impaired + o.Recovery
	var classes []botswarm.Class
	for _, name := range Classes {
		if n := o.Bots[name]; n > 0 {
			c := botswarm.Class{Name: name, Count: n}
			if name != ClassHealthy {
				c.Addr = proxy.Addr()
			}
			classes = append(classes, c)
		}
	}
	swarm, err := botswarm.New(botswarm.Config{
		Server:   srv.Address(),
		Classes:  classes,
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
	l := &lab{o: o, srv: srv, ticks: &ticks, proxy: proxy, swarm: swarm, start: swarm.StartTime(), lastTick: srv.Tick()}
	res := &Result{
		Options:    o,
		ImpairFrom: int(o.Warmup / time.Second),
		ImpairTo:   int((o.Warmup + o.Impaired) / time.Second),
		DropFrom:   int((o.Warmup + o.DropAfter) / time.Second),
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

// lab is one run in progress.
type lab struct {
	o        Options
	srv      *broadcast.Broadcaster
	ticks    *tickWatch
	proxy    *linkem.Proxy
	swarm    *botswarm.Swarm
	start    time.Time
	lastTick uint64 // the server's tick count at the last sample
	// byAddr maps the proxied bots' addresses to their ids, and classOf their ids to their
	// classes, from when the demand is measured.
	byAddr  map[netip.AddrPort]int
	classOf map[int]string
}

// timeline waits through the phases, measuring demand, applying and clearing the impairment, and
// sampling the server and the proxy every second.
func (l *lab) timeline(ctx context.Context, res *Result) error {
	at := func(d time.Duration) time.Time { return l.start.Add(d) }
	demandFrom := l.o.Warmup - l.o.DemandWindow

	if err := l.until(ctx, at(demandFrom), "warm-up", res); err != nil {
		return err
	}
	before := l.proxy.Stats()
	bots := l.bots()
	l.byAddr, l.classOf = map[netip.AddrPort]int{}, map[int]string{}
	for _, c := range before.Clients {
		if b, ok := bots[c.Addr.Port()]; ok {
			l.byAddr[c.Addr], l.classOf[b.ID] = b.ID, b.Class
		}
	}
	t0 := time.Now()
	if err := l.until(ctx, at(l.o.Warmup), "warm-up", res); err != nil {
		return err
	}
	after := l.proxy.Stats()
	elapsed := time.Since(t0).Seconds()
	res.Demand, res.Limit = map[int]float64{}, map[int]int64{}
	profiles := map[netip.AddrPort]linkem.Profile{}
	for _, c := range after.Clients {
		id, ok := l.byAddr[c.Addr]
		if !ok {
			continue
		}
		var prev uint64
		for _, p := range before.Clients {
			if p.Addr == c.Addr {
				prev = p.Down.BytesIn
			}
		}
		demand := float64(c.Down.BytesIn-prev) / elapsed
		res.Demand[id] = demand
		prof, limit := l.impairment(l.classOf[id], demand)
		res.Limit[id] = limit
		profiles[c.Addr] = prof
	}
	if want := l.proxied(); len(res.Demand) != want {
		return fmt.Errorf("congestionlab: measured the demand of %d proxied clients of %d (not all connected)", len(res.Demand), want)
	}
	for addr, prof := range profiles {
		if err := l.proxy.SetProfile(linkem.AddrSelector(addr), prof); err != nil {
			return fmt.Errorf("congestionlab: impair %v: %w", addr, err)
		}
	}
	if err := l.until(ctx, at(l.o.Warmup+l.o.DropAfter), "impaired", res); err != nil {
		return err
	}
	for addr, id := range l.byAddr {
		if l.classOf[id] != ClassDrop {
			continue
		}
		capped := linkem.Profile{Down: linkem.Impairment{RateBytesPerSec: res.Limit[id], QueueMs: l.o.QueueMs}}
		if err := l.proxy.SetProfile(linkem.AddrSelector(addr), capped); err != nil {
			return fmt.Errorf("congestionlab: drop %v: %w", addr, err)
		}
	}
	if err := l.until(ctx, at(l.o.Warmup+l.o.Impaired), "impaired", res); err != nil {
		return err
	}
	res.LinkemAtEnd = l.proxy.Stats()
	for addr := range l.byAddr {
		if err := l.proxy.ResetProfile(linkem.AddrSelector(addr)); err != nil && !errors.Is(err, linkem.ErrNoOverride) {
			return fmt.Errorf("congestionlab: clear: %w", err)
		}
	}
	return l.until(ctx, at(l.o.Warmup+l.o.Impaired+l.o.Recovery), "recovery", res)
}

// impairment is the profile of a proxied client of class at the impairment's start, for a
// measured demand in bytes per second, and the rate its cap or policer holds it to (0: none).
// The drop class starts clean.
func (l *lab) impairment(class string, demand float64) (linkem.Profile, int64) {
	capped := max(int64(demand*l.o.CapRatio), 1)
	var imp linkem.Impairment
	limit := int64(0)
	switch class {
	case ClassLossy:
		imp = linkem.Impairment{Loss: l.o.LossRatio, DelayMs: l.o.DelayMs}
	case ClassBursty:
		imp = linkem.Impairment{Loss: l.o.BurstLossRatio, LossBurst: l.o.BurstLen}
	case ClassCapped:
		imp, limit = linkem.Impairment{RateBytesPerSec: capped, QueueMs: l.o.QueueMs}, capped
	case ClassLossyCapped:
		imp, limit = linkem.Impairment{Loss: l.o.LossRatio, RateBytesPerSec: capped, QueueMs: l.o.QueueMs}, capped
	case ClassPoliced:
		limit = max(int64(demand*l.o.PolicerRatio), 1)
		imp = linkem.Impairment{PolicerBytesPerSec: limit}
	case ClassDrop:
		limit = capped
	}
	return linkem.Profile{Down: imp}, limit
}

// proxied is the number of bots through the proxy.
func (l *lab) proxied() int {
	n := 0
	for _, c := range ImpairedClasses {
		n += l.o.Bots[c]
	}
	return n
}

// until waits for t, sampling the server and the proxy and reporting progress at every whole
// second.
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
		res.Link = append(res.Link, l.linkSample(sec))
		if l.o.Progress != nil {
			l.o.Progress(l.swarm.Progress(), phase)
		}
	}
}

// linkSample is the proxy's per-client downstream counters at the end of second t, for the
// clients whose bot is known.
func (l *lab) linkSample(t int) LinkSample {
	s := LinkSample{T: t}
	if l.byAddr == nil {
		return s
	}
	for _, c := range l.proxy.Stats().Clients {
		if id, ok := l.byAddr[c.Addr]; ok {
			s.Clients = append(s.Clients, LinkCounts{ID: id, BytesIn: c.Down.BytesIn, PacketsIn: c.Down.PacketsIn,
				DroppedLoss: c.Down.DroppedLoss, DroppedPolicer: c.Down.DroppedPolicer, DroppedQueue: c.Down.DroppedQueue})
		}
	}
	return s
}

// bots maps the bots' local ports to them.
func (l *lab) bots() map[uint16]botswarm.ClientReport {
	out := map[uint16]botswarm.ClientReport{}
	for _, c := range l.swarm.Report().Clients {
		if port, ok := localPort(c); ok {
			out[port] = c
		}
	}
	return out
}

func localPort(c botswarm.ClientReport) (uint16, bool) {
	ap, err := netip.ParseAddrPort(c.Local)
	if err != nil {
		return 0, false
	}
	return ap.Port(), true
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
