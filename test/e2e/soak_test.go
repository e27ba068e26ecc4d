//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/linkem"
)

// The soak runs only when soakDurationEnv holds its length (`make soak` sets it, 30m by default):
// a long load run has no place in every test run. It is bounded below so that every third of the
// run holds several samples, and above so that one swarm of bots outlives it.
const (
	soakDurationEnv = "NETFLEET_SOAK_DURATION"
	minSoakDuration = time.Minute
	maxSoakDuration = botswarm.MaxDuration - 10*time.Minute

	// sampleEvery is the sampling period of every process's RSS and goroutine count.
	sampleEvery = 10 * time.Second
	// editEvery is the period of the live netcode edits and of the impairment changes.
	editEvery = 20 * time.Second
	// churnHz is the connect/close cycles per second against each server: under the default
	// per-source connect limit (10/s), which the steady bots share, so none is refused.
	churnHz = 4
	// churnTimeout bounds a churn handshake and its close: on a loaded machine a second is short.
	churnTimeout = 5 * time.Second
	// minChurnCompleted is the share of churn attempts that must complete a connect/close cycle.
	minChurnCompleted = 0.9
)

// How much a process may grow over a soak and still count as flat (see judgeFlat). RSS: a Go
// heap's size moves with the collector's pacing and the pools' high-water marks, so a quarter
// of the warm-up's peak, or 16 MiB for a small process. Goroutines: a few HTTP connections come
// and go (keep-alive connections of the operator's pushes and of the scrapes), so 20, or a tenth
// for a process that runs hundreds.
var (
	rssBound       = flatBound{Rel: 0.25, Abs: 16 << 20}
	goroutineBound = flatBound{Rel: 0.10, Abs: 20}
)

// soakLinks are the impairments of the bots that play through linkem, alternated at every edit:
// a lossy distant link, then a worse one whose downstream cap is below what the server would
// send, so that the congestion response has work for the whole run.
var soakLinks = []linkem.Profile{
	{
		Up:   linkem.Impairment{Loss: 0.01, DelayMs: 30, JitterMs: 5},
		Down: linkem.Impairment{Loss: 0.02, DelayMs: 30, JitterMs: 5},
	},
	{
		Up:   linkem.Impairment{Loss: 0.02, DelayMs: 60, JitterMs: 10},
		Down: linkem.Impairment{Loss: 0.05, DelayMs: 60, JitterMs: 10, RateBytesPerSec: 24000},
	},
}

// soakMinSendHz alternates at every edit, so that each edit changes what the servers run.
var soakMinSendHz = []int32{16, 12}

// TestSoak runs a Fleet of two game servers (one of them Allocated) for the soak's duration
// under everything at once: steady bots, half of them through linkem with loss, delay and jitter
// whose profile changes every editEvery; connect/close churn against every server; and a live
// netcode edit every editEvery, each of which must converge with no Pod or process replaced.
// Every sampleEvery it samples the RSS and goroutine count of the operator and of every
// game-server process, and each series must stay flat (judgeFlat). At the end the operator and
// the game-server processes are the ones the run began with, and every steady bot was connected
// throughout. The samples are printed and written, with the verdicts, to _out/soak/soak.json.
func TestSoak(t *testing.T) {
	duration := soakDuration(t)
	operator := ensureOperator(t)
	ns := newNamespace(t, "soak")
	obs := observe(t, ns)
	const fleet = "arena"
	createFleet(t, ns, fleet, 2)
	waitConverged(t, ns, fleet)
	allocate(t, ns, fleet)
	initial := waitConverged(t, ns, fleet)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		classes []botswarm.Class
		proxies []*linkem.Proxy
	)
	for i, s := range initial {
		proxy, err := linkem.New(linkem.Config{Listen: "127.0.0.1:0", Upstream: s.game.String(), Seed: uint64(i + 1), Default: soakLinks[0]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := proxy.Close(); err != nil {
				t.Errorf("linkem: %v", err)
			}
		})
		proxies = append(proxies, proxy)
		classes = append(classes,
			botswarm.Class{Name: fmt.Sprintf("direct-%d", i), Count: 2, Addr: s.game},
			botswarm.Class{Name: fmt.Sprintf("impaired-%d", i), Count: 2, Addr: proxy.Addr()})
	}
	cfg := botswarm.Config{
		Classes:    classes,
		Duration:   duration + 5*time.Minute, // ended by cancel
		CommandsHz: 10,
		Seed:       1,
	}
	swarm, err := botswarm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := swarm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var churning sync.WaitGroup
	// On a failure, everything the test started ends before its cleanups run.
	defer func() {
		cancel()
		churning.Wait()
		swarm.Wait()
	}()
	waitFor(t, "the bots connected", waitLimit, func() (bool, error) {
		p := swarm.Progress()
		return p.States[botswarm.StateConnected] == cfg.Bots(), fmt.Errorf("bot states %v", p.States)
	})

	churns := make([]*botswarm.ChurnReport, len(initial))
	churnErrs := make([]error, len(initial))
	for i, s := range initial {
		churning.Go(func() {
			churns[i], churnErrs[i] = botswarm.RunChurn(ctx, botswarm.ChurnConfig{
				Server: s.game, Rate: churnHz, Duration: duration,
				ConnectTimeout: churnTimeout, CloseTimeout: churnTimeout, Peers: 64,
			})
		})
	}

	procs := soakProcesses(t, initial)
	start := time.Now()
	sampled := make(chan sampling, 1)
	go func() { sampled <- sample(ctx, start, duration, procs) }()

	var edits []soakEdit
	for i := 1; ; i++ {
		at := start.Add(time.Duration(i) * editEvery)
		// An edit needs time to converge before the run ends.
		if at.After(start.Add(duration - editEvery/2)) {
			break
		}
		time.Sleep(time.Until(at))
		edits = append(edits, editLive(t, ns, fleet, i, start, initial, proxies))
	}

	got := <-sampled
	churning.Wait()
	cancel()
	report := swarm.Wait()

	for _, err := range got.errs {
		t.Error(err)
	}
	checkSurvivors(t, ns, fleet, initial, operator)
	checkBots(t, report)
	checkChurn(t, churns, churnErrs)
	logEdits(t, edits)
	obs.check(t)

	for i := range got.series {
		judge(t, &got.series[i])
	}
	logSamples(t, got.series)
	writeSoakReport(t, soakReport{
		Duration: duration.String(), SampleEvery: sampleEvery.String(), EditEvery: editEvery.String(),
		Bounds:    map[string]flatBound{"rssBytes": rssBound, "goroutines": goroutineBound},
		Processes: got.series, Edits: edits, Bots: classSummaries(report), Churn: churns,
	})
}

// soakDuration reads soakDurationEnv.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv(soakDurationEnv)
	if v == "" {
		t.Skipf("the soak runs with %s set (make soak)", soakDurationEnv)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < minSoakDuration || d > maxSoakDuration {
		t.Fatalf("%s=%q: want a duration from %s to %s", soakDurationEnv, v, minSoakDuration, maxSoakDuration)
	}
	return d
}

// soakEdit is one live netcode edit of the run.
type soakEdit struct {
	AtS         float64 `json:"atS"` // seconds from the first sample
	MinSendHz   int32   `json:"minSendHz"`
	ConvergedMs int64   `json:"convergedMs"` // from the update to every process running it
}

// editLive makes the i-th live edit: a netcode change of the Fleet, which must reach every
// server's process and status with no GameServer, Pod or process replaced, and a change of the
// impaired bots' link.
func editLive(t *testing.T, ns, fleet string, i int, start time.Time, initial []server, proxies []*linkem.Proxy) soakEdit {
	t.Helper()
	hz := soakMinSendHz[i%len(soakMinSendHz)]
	for _, p := range proxies {
		if err := p.SetProfile(linkem.DefaultSelector(), soakLinks[i%len(soakLinks)]); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	updateFleet(t, ns, fleet, func(f *v1alpha1.Fleet) { f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = hz })
	servers := waitConverged(t, ns, fleet)
	took := time.Since(began)
	if err := sameProcesses(initial, servers); err != nil {
		t.Errorf("edit %d (minSendHz %d): %v", i, hz, err)
	}
	for _, s := range servers {
		if got := s.gs.Spec.Netcode.Congestion.MinSendHz; got != hz {
			t.Errorf("edit %d: %s has minSendHz %d, want %d", i, s.gs.Name, got, hz)
		}
	}
	return soakEdit{AtS: began.Sub(start).Seconds(), MinSendHz: hz, ConvergedMs: took.Milliseconds()}
}

// sameProcesses checks that now holds the servers of initial, each with the same GameServer,
// Pod and process as then, and no container restart.
func sameProcesses(initial, now []server) error {
	if len(now) != len(initial) {
		return fmt.Errorf("%d servers, want the %d the run began with", len(now), len(initial))
	}
	was := byName(initial)
	var errs []error
	for _, s := range now {
		old, ok := was[s.gs.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("server %s is new: the fleet replaced a server", s.gs.Name))
			continue
		}
		oldPID, err := old.pid()
		if err != nil {
			return err
		}
		pid, err := s.pid()
		if err != nil {
			return err
		}
		oldCS, cs := old.pod.Status.ContainerStatuses[0], s.pod.Status.ContainerStatuses[0]
		switch {
		case s.gs.UID != old.gs.UID || s.pod.UID != old.pod.UID:
			errs = append(errs, fmt.Errorf("%s: GameServer or Pod replaced (pod %s -> %s)", s.gs.Name, old.pod.UID, s.pod.UID))
		case pid != oldPID || s.gs.Status.Netcode.InstanceID != old.gs.Status.Netcode.InstanceID || cs.RestartCount != oldCS.RestartCount:
			errs = append(errs, fmt.Errorf("%s: process replaced (pid %d -> %d, instance %s -> %s, restarts %d -> %d)",
				s.gs.Name, oldPID, pid, old.gs.Status.Netcode.InstanceID, s.gs.Status.Netcode.InstanceID, oldCS.RestartCount, cs.RestartCount))
		}
	}
	return errors.Join(errs...)
}

// logEdits summarizes how long the live edits took to run on every process.
func logEdits(t *testing.T, edits []soakEdit) {
	t.Helper()
	if len(edits) == 0 {
		return
	}
	took := make([]time.Duration, len(edits))
	for i, e := range edits {
		took[i] = time.Duration(e.ConvergedMs) * time.Millisecond
	}
	slices.Sort(took)
	t.Logf("%d live netcode edits, each running on every process with no Pod or process replaced: median %s, max %s from the update",
		len(edits), took[len(took)/2], took[len(took)-1])
}

// checkSurvivors checks, at the end of the run, that the operator and every game-server process
// are the ones it began with, alive, and that the Allocated server is still Allocated.
func checkSurvivors(t *testing.T, ns, fleet string, initial []server, operator *child) {
	t.Helper()
	if proc, _ := env.operator.current(); proc != operator || operator.exited() || !alive(operator.pid()) {
		t.Errorf("the operator process did not live through the soak (%v)", operator.err)
	}
	now := mustServers(t, ns, fleet)
	if err := sameProcesses(initial, now); err != nil {
		t.Error(err)
	}
	cur := byName(now)
	for _, s := range initial {
		pid, err := s.pid()
		if err != nil {
			t.Fatal(err)
		}
		if !alive(pid) {
			t.Errorf("%s: process %d is gone", s.gs.Name, pid)
		}
		if s.gs.Status.State == v1alpha1.GameServerStateAllocated && cur[s.gs.Name].gs.Status.State != v1alpha1.GameServerStateAllocated {
			t.Errorf("%s was Allocated and is %q", s.gs.Name, cur[s.gs.Name].gs.Status.State)
		}
	}
}

// checkBots checks that every steady bot was connected from its start to the end of the run,
// and logs what each class received.
func checkBots(t *testing.T, report *botswarm.Report) {
	t.Helper()
	for _, c := range report.Clients {
		if c.State != botswarm.StateDone {
			t.Errorf("bot %d (%s) ended %s (close code %d, %s) at %d ms", c.ID, c.Class, c.State, c.CloseCode, c.Error, c.ClosedMs)
		}
	}
	for _, cl := range report.Classes {
		s := cl.Summary
		t.Logf("bots %-10s %v: median %.0f Hz (min %d), %.1f kB/s, loss %.1f%%, snapshot age p95 %.0f ms",
			cl.Name, cl.States, s.HzMedian, s.HzMin, s.KBps, s.LossPct, s.AgeP95Ms)
	}
}

// checkChurn checks that the churn against every server kept completing connect/close cycles.
func checkChurn(t *testing.T, reports []*botswarm.ChurnReport, errs []error) {
	t.Helper()
	for i, r := range reports {
		if errs[i] != nil {
			t.Errorf("churn %d: %v", i, errs[i])
			continue
		}
		t.Logf("churn against %s: %d attempts, %d cycles, %d refused, %d timeouts, %d closed by the server, handshake p50 %.0f ms p95 %.0f ms",
			r.Server, r.Attempts, r.Cycles, r.Refused, r.Timeouts, r.ClosedByServer, r.ConnectMsP50, r.ConnectMsP95)
		if float64(r.Cycles) < minChurnCompleted*float64(r.Attempts) || r.Attempts == 0 {
			t.Errorf("churn against %s: %d of %d attempts completed a cycle, want at least %.0f%%", r.Server, r.Cycles, r.Attempts, 100*minChurnCompleted)
		}
	}
}

// classSummaries are the bots' per-class results without their per-second series.
func classSummaries(r *botswarm.Report) []botswarm.ClassReport {
	out := make([]botswarm.ClassReport, len(r.Classes))
	for i, cl := range r.Classes {
		cl.Series = nil
		out[i] = cl
	}
	return out
}

// watched is a process the soak samples: its pid and its Prometheus endpoint.
type watched struct {
	name, kind string
	pid        int
	metrics    string
}

// soakProcesses are the operator and the game-server processes of servers.
func soakProcesses(t *testing.T, servers []server) []watched {
	t.Helper()
	proc, metrics := env.operator.current()
	out := []watched{{name: "operator", kind: "operator", pid: proc.pid(), metrics: "http://" + metrics + "/metrics"}}
	for _, s := range servers {
		pid, err := s.pid()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, watched{name: s.gs.Name, kind: "gameserver", pid: pid, metrics: "http://" + s.admin + netcode.PathMetrics})
	}
	return out
}

// processSeries is one process's samples and the verdicts on them.
type processSeries struct {
	Name       string    `json:"name"`
	Kind       string    `json:"kind"`
	PID        int       `json:"pid"`
	T          []float64 `json:"t"` // seconds from the first sample
	RSSBytes   []float64 `json:"rssBytes"`
	Goroutines []float64 `json:"goroutines"`
	RSS        flatness  `json:"rss"`
	Goroutine  flatness  `json:"goroutine"`
}

// sampling is what the sampler collected.
type sampling struct {
	series []processSeries
	errs   []error
}

// sample samples every process at start, then every sampleEvery up to start+duration. A process
// that is gone, or whose RSS or goroutine count cannot be read, is an error; its sample is skipped.
func sample(ctx context.Context, start time.Time, duration time.Duration, procs []watched) sampling {
	var out sampling
	for _, p := range procs {
		out.series = append(out.series, processSeries{Name: p.name, Kind: p.kind, PID: p.pid})
	}
	for at := start; !at.After(start.Add(duration)); at = at.Add(sampleEvery) {
		select {
		case <-time.After(time.Until(at)):
		case <-ctx.Done():
			return out
		}
		for i, p := range procs {
			rss, gor, err := readProcess(p)
			if err != nil {
				out.errs = append(out.errs, fmt.Errorf("sample at %s: %s: %w", at.Sub(start).Round(time.Second), p.name, err))
				continue
			}
			s := &out.series[i]
			s.T = append(s.T, time.Since(start).Seconds())
			s.RSSBytes = append(s.RSSBytes, float64(rss))
			s.Goroutines = append(s.Goroutines, gor)
		}
	}
	return out
}

// readProcess reads a live process's RSS and, from its /metrics, its goroutine count.
func readProcess(p watched) (int64, float64, error) {
	if !alive(p.pid) {
		return 0, 0, fmt.Errorf("process %d is gone", p.pid)
	}
	rss, err := rssBytes(p.pid)
	if err != nil {
		return 0, 0, err
	}
	m, err := metricSamples(p.metrics, "go_goroutines")
	if err != nil {
		return 0, 0, err
	}
	gor, ok := m["go_goroutines"][""]
	if !ok {
		return 0, 0, fmt.Errorf("%s has no go_goroutines", p.metrics)
	}
	return rss, gor, nil
}

// judge sets a series' verdicts and fails the test for a series that is not flat.
func judge(t *testing.T, s *processSeries) {
	t.Helper()
	var err error
	if s.RSS, err = judgeFlat(s.T, s.RSSBytes, rssBound); err != nil {
		t.Errorf("%s RSS: %v", s.Name, err)
	} else if !s.RSS.Flat {
		t.Errorf("%s RSS is not flat: %s", s.Name, s.RSS.describe(1<<20, "MiB"))
	}
	if s.Goroutine, err = judgeFlat(s.T, s.Goroutines, goroutineBound); err != nil {
		t.Errorf("%s goroutines: %v", s.Name, err)
	} else if !s.Goroutine.Flat {
		t.Errorf("%s goroutines are not flat: %s", s.Name, s.Goroutine.describe(1, "goroutines"))
	}
}

// flatBound is how much a series may grow and still count as flat: the larger of Rel times its
// warm-up maximum and Abs, in the series' unit.
type flatBound struct {
	Rel float64 `json:"rel"`
	Abs float64 `json:"abs"`
}

// flatness is the verdict of judgeFlat on one series.
type flatness struct {
	// WarmMax is the maximum of the warm-up, the first third of the samples; LateMax that of the
	// last third.
	WarmMax float64 `json:"warmMax"`
	LateMax float64 `json:"lateMax"`
	// Trend is the least-squares slope of the samples after the warm-up, extrapolated over the
	// whole run (first to last sample).
	Trend float64 `json:"trend"`
	// Margin is the growth allowed: the bound applied to WarmMax.
	Margin float64 `json:"margin"`
	// Step: LateMax exceeds WarmMax by more than Margin. Trending: Trend exceeds Margin.
	Step     bool `json:"step"`
	Trending bool `json:"trending"`
	Flat     bool `json:"flat"`
}

// minFlatSamples is the fewest samples judgeFlat judges: two in each third.
const minFlatSamples = 6

// judgeFlat decides whether a resource sampled at times ts (strictly increasing) stayed flat. The
// first third of the samples is the warm-up, in which caches, pools and the heap settle. The
// series is flat when (a) no sample of the last third exceeds the warm-up's maximum by more than
// the margin, and (b) the least-squares slope over the samples after the warm-up, extrapolated
// over the whole run, stays within the margin. (a) catches growth that happened, (b) growth that
// is still going on, also when a warm-up spike hides it from (a). A leak slower than the margin
// over the run passes: a longer run catches a slower leak.
func judgeFlat(ts, vs []float64, b flatBound) (flatness, error) {
	n := len(vs)
	switch {
	case len(ts) != n:
		return flatness{}, fmt.Errorf("%d times for %d samples", len(ts), n)
	case n < minFlatSamples:
		return flatness{}, fmt.Errorf("%d samples, too few to judge (want at least %d)", n, minFlatSamples)
	}
	for i := 1; i < n; i++ {
		if ts[i] <= ts[i-1] {
			return flatness{}, fmt.Errorf("sample times not increasing at %d (%v then %v)", i, ts[i-1], ts[i])
		}
	}
	k := n / 3
	f := flatness{WarmMax: slices.Max(vs[:k]), LateMax: slices.Max(vs[n-k:])}
	f.Margin = max(b.Abs, b.Rel*f.WarmMax)
	f.Trend = slope(ts[k:], vs[k:]) * (ts[n-1] - ts[0])
	f.Step = f.LateMax-f.WarmMax > f.Margin
	f.Trending = f.Trend > f.Margin
	f.Flat = !f.Step && !f.Trending
	return f, nil
}

// slope is the least-squares slope of ys over xs; the xs are not all equal.
func slope(xs, ys []float64) float64 {
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	return sxy / sxx
}

// describe renders a verdict in unit (a value is divided by scale).
func (f flatness) describe(scale float64, unit string) string {
	verdict := "flat"
	switch {
	case f.Step && f.Trending:
		verdict = "grew past the margin and is still growing"
	case f.Step:
		verdict = "grew past the margin"
	case f.Trending:
		verdict = "still growing past the margin"
	}
	return fmt.Sprintf("warm-up max %.1f, last-third max %.1f, trend %+.1f over the run, margin %.1f %s: %s",
		f.WarmMax/scale, f.LateMax/scale, f.Trend/scale, f.Margin/scale, unit, verdict)
}

// logSamples prints the samples as a table, one row per sample time, and the verdicts.
func logSamples(t *testing.T, series []processSeries) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%6s", "t (s)")
	for _, s := range series {
		fmt.Fprintf(&b, "  %24s", s.Name+" MiB/goroutines")
	}
	rows := 0
	for _, s := range series {
		rows = max(rows, len(s.T))
	}
	for r := range rows {
		b.WriteString("\n")
		if r < len(series[0].T) {
			fmt.Fprintf(&b, "%6.0f", series[0].T[r])
		} else {
			fmt.Fprintf(&b, "%6s", "")
		}
		for _, s := range series {
			if r >= len(s.T) {
				fmt.Fprintf(&b, "  %24s", "-")
				continue
			}
			fmt.Fprintf(&b, "  %24s", fmt.Sprintf("%.1f / %.0f", s.RSSBytes[r]/(1<<20), s.Goroutines[r]))
		}
	}
	t.Logf("samples every %s:\n%s", sampleEvery, b.String())
	for _, s := range series {
		t.Logf("%s RSS: %s", s.Name, s.RSS.describe(1<<20, "MiB"))
		t.Logf("%s goroutines: %s", s.Name, s.Goroutine.describe(1, "goroutines"))
	}
}

// soakReport is the JSON the soak writes.
type soakReport struct {
	Duration    string                  `json:"duration"`
	SampleEvery string                  `json:"sampleEvery"`
	EditEvery   string                  `json:"editEvery"`
	Bounds      map[string]flatBound    `json:"bounds"`
	Processes   []processSeries         `json:"processes"`
	Edits       []soakEdit              `json:"edits"`
	Bots        []botswarm.ClassReport  `json:"bots"`
	Churn       []*botswarm.ChurnReport `json:"churn"`
}

// writeSoakReport writes r to _out/soak/soak.json under the repository root.
func writeSoakReport(t *testing.T, r soakReport) {
	t.Helper()
	dir := filepath.Join(env.root, "_out", "soak")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "soak.json")
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("samples and verdicts written to %s", path)
}

// TestJudgeFlat holds the flatness criterion to series with and without a leak, 13 samples 10 s
// apart as in a 2-minute soak.
func TestJudgeFlat(t *testing.T) {
	mib := func(vs ...float64) []float64 {
		out := make([]float64, len(vs))
		for i, v := range vs {
			out[i] = v * (1 << 20)
		}
		return out
	}
	line := func(base, perSample float64, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = base + perSample*float64(i)
		}
		return out
	}
	every10s := func(n int) []float64 { return line(0, 10, n) }
	tests := []struct {
		name           string
		ts, vs         []float64
		bound          flatBound
		step, trending bool
		err            bool
	}{
		{
			name:  "flat RSS with noise",
			vs:    mib(40, 41.5, 39, 42, 38, 40.5, 41, 39.5, 42, 38.5, 40, 41.5, 39),
			bound: rssBound,
		},
		{
			name:  "RSS growing in the warm-up, then flat",
			vs:    mib(20, 30, 38, 40, 41, 40, 41, 40, 41, 40, 41, 40, 41),
			bound: rssBound,
		},
		{
			name:  "RSS sawtooth of a collected heap",
			vs:    mib(40, 48, 42, 50, 41, 49, 43, 50, 42, 48, 41, 50, 43),
			bound: rssBound,
		},
		{
			name:  "RSS leaking 2 MiB every sample",
			vs:    mib(line(40, 2, 13)...),
			bound: rssBound,
			step:  true, trending: true,
		},
		{
			name:     "RSS leak hidden under a warm-up spike",
			vs:       mib(append([]float64{90, 60, 45, 40}, line(43, 3, 9)...)...),
			bound:    rssBound,
			trending: true,
		},
		{
			name:  "RSS jump late in the run",
			vs:    mib(40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 70, 40, 40),
			bound: rssBound,
			step:  true,
		},
		{
			name:  "goroutines coming and going",
			vs:    []float64{14, 16, 15, 18, 16, 14, 17, 15, 16, 18, 14, 16, 15},
			bound: goroutineBound,
		},
		{
			name:  "goroutines leaking 3 every sample",
			vs:    line(15, 3, 13),
			bound: goroutineBound,
			step:  true, trending: true,
		},
		{name: "too few samples", vs: []float64{1, 1, 1, 1, 1}, bound: goroutineBound, err: true},
		{name: "times out of order", ts: []float64{0, 10, 20, 20, 40, 50}, vs: []float64{1, 1, 1, 1, 1, 1}, bound: goroutineBound, err: true},
		{name: "fewer times than samples", ts: every10s(6), vs: make([]float64, 7), bound: goroutineBound, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.ts
			if ts == nil {
				ts = every10s(len(tc.vs))
			}
			f, err := judgeFlat(ts, tc.vs, tc.bound)
			if tc.err {
				if err == nil {
					t.Fatalf("judged %+v, want an error", f)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Step != tc.step || f.Trending != tc.trending || f.Flat != (!tc.step && !tc.trending) {
				t.Errorf("step %v, trending %v, flat %v; want step %v, trending %v (%s)",
					f.Step, f.Trending, f.Flat, tc.step, tc.trending, f.describe(1, "units"))
			}
		})
	}
}
