package botswarm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/netfleet/netfleet/gameserver/enet"
)

// Swarm runs a configured set of bots, one goroutine and one ENet host each.
type Swarm struct {
	cfg  Config
	bots []*bot

	mu      sync.Mutex
	started bool
	start   time.Time
	wg      sync.WaitGroup
}

// New validates cfg and returns a swarm ready to Start.
func New(cfg Config) (*Swarm, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Swarm{cfg: cfg.withDefaults()}, nil
}

// Start opens every bot's socket and starts the bots; they connect over Config.Ramp and close
// after Config.Duration, or when ctx ends. It fails, having started nothing, if a socket cannot
// be opened. Start may be called once.
func (s *Swarm) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("botswarm: already started")
	}
	seconds := int((s.cfg.Duration+time.Second-1)/time.Second) + 1 // and the closing second
	bots := make([]*bot, 0, s.cfg.Bots())
	for _, cl := range s.cfg.Classes {
		target := cl.Addr
		if !target.IsValid() {
			target = s.cfg.Server
		}
		for range cl.Count {
			id := len(bots)
			h, err := enet.NewHost(hostConfig(s.cfg.bindAddr(id)))
			if err != nil {
				for _, b := range bots {
					b.host.Destroy()
				}
				return fmt.Errorf("botswarm: bot %d: %w", id, err)
			}
			bots = append(bots, newBot(id, cl.Name, target, h, &s.cfg, seconds))
		}
	}
	s.bots = bots
	s.started = true
	s.start = time.Now()
	end := s.start.Add(s.cfg.Duration)
	for i, b := range bots {
		connectAt := s.start
		if len(bots) > 1 {
			connectAt = connectAt.Add(s.cfg.Ramp * time.Duration(i) / time.Duration(len(bots)-1))
		}
		s.wg.Go(func() { b.run(ctx, &s.cfg, s.start, connectAt, end) })
	}
	return nil
}

// Wait blocks until every bot has closed and returns the final report.
func (s *Swarm) Wait() *Report {
	s.wg.Wait()
	return s.Report()
}

// Run starts the swarm and waits for it.
func (s *Swarm) Run(ctx context.Context) (*Report, error) {
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s.Wait(), nil
}

// StartTime is when the swarm started: second t of every series begins at StartTime + t s.
// It is the zero time before Start.
func (s *Swarm) StartTime() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start
}

// Report returns the swarm's report as of now; it is safe to call while the swarm runs.
func (s *Swarm) Report() *Report {
	s.mu.Lock()
	start, bots := s.start, s.bots
	s.mu.Unlock()
	elapsed := time.Since(start)
	if start.IsZero() {
		elapsed = 0
	}
	r := &Report{
		Server:    s.cfg.Server.String(),
		Seed:      s.cfg.Seed,
		Start:     start,
		ElapsedMs: elapsed.Milliseconds(),
		Clients:   make([]ClientReport, len(bots)),
	}
	for i, b := range bots {
		r.Clients[i] = b.report(elapsed)
	}
	seconds := 0
	if len(r.Clients) > 0 {
		seconds = len(r.Clients[0].Series)
	}
	for _, cl := range s.cfg.Classes {
		cr := ClassReport{Name: cl.Name, Target: s.cfg.Server.String(), States: map[string]int{}}
		if cl.Addr.IsValid() {
			cr.Target = cl.Addr.String()
		}
		var members []ClientReport
		for _, c := range r.Clients {
			if c.Class != cl.Name {
				continue
			}
			members = append(members, c)
			cr.States[c.State]++
			if c.State == StateClosed {
				if cr.CloseCodes == nil {
					cr.CloseCodes = map[uint32]int{}
				}
				cr.CloseCodes[c.CloseCode]++
			}
		}
		cr.Summary = Summarize(members, 0, 0)
		cr.Series = classSeries(members, seconds)
		r.Classes = append(r.Classes, cr)
	}
	return r
}

// report copies the bot's record as of elapsed into a ClientReport.
func (b *bot) report(elapsed time.Duration) ClientReport {
	b.mu.Lock()
	rec := b.rec
	rec.series = append([]Second(nil), b.rec.series...)
	b.mu.Unlock()
	c := ClientReport{
		ID:          b.id,
		Class:       b.class,
		Target:      b.target.String(),
		Local:       b.local.String(),
		State:       rec.state,
		Error:       rec.err,
		ConnectedMs: msOrNone(rec.connectedAt),
		ClosedMs:    msOrNone(rec.closedAt),
		CloseCode:   rec.closeCode,
		Totals:      rec.totals,
		Series:      rec.series,
	}
	upUntil := elapsed
	if rec.closedAt >= 0 {
		upUntil = rec.closedAt
	}
	for t := range c.Series {
		sec := &c.Series[t]
		begin := time.Duration(t) * time.Second
		sec.Full = rec.connectedAt >= 0 && rec.connectedAt <= begin && begin+time.Second <= upUntil
		sec.AgeP50Ms = sec.Age.Quantile(0.50)
		sec.AgeP95Ms = sec.Age.Quantile(0.95)
	}
	c.Summary = Summarize([]ClientReport{c}, 0, 0)
	return c
}

func msOrNone(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// Progress is a live view of a running swarm: bot states and the last complete second.
type Progress struct {
	Elapsed time.Duration
	States  map[string]int
	// Classes holds, per class, second Second of the run (the last complete one).
	Second  int
	Classes []ClassProgress
}

// ClassProgress is one class in a Progress.
type ClassProgress struct {
	Name string
	ClassSecondStat
}

// Progress returns the bots' states and every class's last complete second; it is cheaper than
// Report and safe to call while the swarm runs.
func (s *Swarm) Progress() Progress {
	s.mu.Lock()
	start, bots := s.start, s.bots
	s.mu.Unlock()
	p := Progress{States: map[string]int{}}
	if start.IsZero() {
		return p
	}
	p.Elapsed = time.Since(start)
	p.Second = max(int(p.Elapsed/time.Second)-1, 0)
	byClass := map[string][]*Second{}
	for _, b := range bots {
		b.mu.Lock()
		p.States[b.rec.state]++
		begin := time.Duration(p.Second) * time.Second
		up := b.rec.connectedAt >= 0 && b.rec.connectedAt <= begin &&
			(b.rec.closedAt < 0 || b.rec.closedAt >= begin+time.Second)
		if up && p.Second < len(b.rec.series) {
			sec := b.rec.series[p.Second]
			byClass[b.class] = append(byClass[b.class], &sec)
		}
		b.mu.Unlock()
	}
	for _, cl := range s.cfg.Classes {
		p.Classes = append(p.Classes, ClassProgress{Name: cl.Name, ClassSecondStat: secondStat(p.Second, byClass[cl.Name])})
	}
	return p
}
