package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

const (
	// autoscaleBenchServers is the size of each benchmark fleet between bursts:
	// autoscaleBenchAllocated running matches and a 20% buffer of free servers.
	autoscaleBenchServers   = 200
	autoscaleBenchAllocated = 160
	autoscaleBenchBuffer    = "20%"
	// autoscaleBenchBurst allocations arrive at once, from autoscaleBenchClients matchmaker
	// connections: half of the buffer, so every one finds a free server.
	autoscaleBenchBurst   = 20
	autoscaleBenchClients = 8
	// autoscaleBenchPeriod is the baseline's period: a policy that looks at its fleet every 30 s,
	// Agones' default.
	autoscaleBenchPeriod = 30
)

// autoscaleBenchFleets are the benchmark's two fleets, one per mode, built once per test binary;
// autoscaleBenchRuns accumulate over -count, for the table and the JSON.
var (
	autoscaleBenchFleets []*autoscaleBench
	autoscaleBenchRuns   []autoscaleBenchResult
)

// autoscaleBench is one benchmark fleet, its autoscaler and a watch on both.
type autoscaleBench struct {
	mode  string // "events" or "periodic-30s"
	fleet *v1alpha1.Fleet
	// periodic: the autoscaler looks every autoscaleBenchPeriod only, and each burst starts at a
	// random moment of that period.
	periodic bool

	mu sync.Mutex
	// replicas and up are the histories of the fleet's spec.replicas and of its servers that are
	// up (Ready or Allocated), as the watch saw them change.
	replicas, up []levelAt
	states       map[string]v1alpha1.GameServerState
	upNow        int
	// raiseAll and readyAll are the latencies of every burst so far.
	raiseAll, readyAll []time.Duration
}

type levelAt struct {
	at    time.Time
	level int
}

// autoscaleBenchResult is one burst of BenchmarkFleetAutoscaler, as written to
// _out/bench/fleet-autoscaler.json. Latencies run from each allocation's answer to the watch
// showing the fleet's spec.replicas raised to what the buffer wants after it (Raise) and as many
// servers up, Ready or Allocated (Ready).
type autoscaleBenchResult struct {
	Mode        string  `json:"mode"`
	Servers     int     `json:"servers"`
	Allocated   int     `json:"allocatedBefore"`
	Buffer      string  `json:"buffer"`
	Allocations int     `json:"allocations"`
	Clients     int     `json:"clients"`
	BurstMs     float64 `json:"burstMs"`
	RaiseP50Ms  float64 `json:"raiseP50Ms"`
	RaiseP99Ms  float64 `json:"raiseP99Ms"`
	RaiseMaxMs  float64 `json:"raiseMaxMs"`
	ReadyP50Ms  float64 `json:"readyP50Ms"`
	ReadyP99Ms  float64 `json:"readyP99Ms"`
	ReadyMaxMs  float64 `json:"readyMaxMs"`
	FinalLevel  int     `json:"replicasAfter"`
	// Passes are the autoscaler reconciles from the burst's start to the fleet's last raise;
	// PassMeanMs is their mean duration and QueueMeanMs their mean wait in the work queue.
	Passes      int     `json:"passes"`
	PassMeanMs  float64 `json:"passMeanMs"`
	QueueMeanMs float64 `json:"queueMeanMs"`
}

// BenchmarkFleetAutoscaler measures how fast a Buffer policy refills a fleet's buffer. Two fleets
// of 200 servers run side by side, each with 160 matches (Allocated servers) and a 20% buffer of
// 40 free servers; one is scaled on events (the default), the other by a policy that looks every
// 30 s (spec.sync.mode Interval), the way Agones' FleetAutoscaler does by default, its bursts
// coming at a random moment of its period. Each iteration
// sends a burst of 20 allocations at each fleet in turn, 8 at a time through the allocator
// endpoint, and measures for every allocation, from its answer: the time until a watch shows the
// fleet's spec.replicas raised to what the buffer wants after it, and the time until as many of
// its servers are up (Ready or Allocated). The burst's matches then end and the fleet settles
// back at 200 before the next burst. The goal: replicas raised within 1 s at p99 on events.
func BenchmarkFleetAutoscaler(b *testing.B) {
	if autoscaleBenchFleets == nil {
		autoscaleBenchFleets = []*autoscaleBench{
			newAutoscaleBench(b, "events", v1alpha1.FleetAutoscalerSyncEvents),
			newAutoscaleBench(b, fmt.Sprintf("periodic-%ds", autoscaleBenchPeriod), v1alpha1.FleetAutoscalerSyncInterval),
		}
	}
	token := allocatorToken(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: autoscaleBenchClients}, Timeout: 30 * time.Second}
	for b.Loop() {
		for _, ab := range autoscaleBenchFleets {
			autoscaleBenchRuns = append(autoscaleBenchRuns, ab.burst(b, hc, token))
		}
	}
	summary := printAutoscaleBench()
	for _, s := range summary {
		b.ReportMetric(s.RaiseP50Ms, s.Mode+"-raise-p50-ms")
		b.ReportMetric(s.RaiseP99Ms, s.Mode+"-raise-p99-ms")
		b.ReportMetric(s.ReadyP99Ms, s.Mode+"-ready-p99-ms")
	}
	writeFleetBench(b, "fleet-autoscaler.json", map[string]any{"bursts": autoscaleBenchRuns, "summary": summary})
}

// autoscaleBenchSummary is one mode's latencies over the allocations of all its bursts so far.
type autoscaleBenchSummary struct {
	Mode        string  `json:"mode"`
	Bursts      int     `json:"bursts"`
	Allocations int     `json:"allocations"`
	RaiseP50Ms  float64 `json:"raiseP50Ms"`
	RaiseP99Ms  float64 `json:"raiseP99Ms"`
	RaiseMaxMs  float64 `json:"raiseMaxMs"`
	ReadyP50Ms  float64 `json:"readyP50Ms"`
	ReadyP99Ms  float64 `json:"readyP99Ms"`
	ReadyMaxMs  float64 `json:"readyMaxMs"`
}

// printAutoscaleBench prints every burst so far, then each mode's latencies over all its
// bursts' allocations, which it returns.
func printAutoscaleBench() []autoscaleBenchSummary {
	fmt.Printf("\n%-14s %7s %9s %6s %7s %8s %9s %9s %9s %9s %9s %9s %8s %6s %8s %8s\n", "mode", "servers", "allocated", "burst", "clients",
		"burst ms", "raise p50", "raise p99", "raise max", "ready p50", "ready p99", "ready max", "replicas", "passes", "pass ms", "queue ms")
	for _, r := range autoscaleBenchRuns {
		fmt.Printf("%-14s %7d %9d %6d %7d %8.0f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %8d %6d %8.1f %8.1f\n", r.Mode, r.Servers, r.Allocated, r.Allocations,
			r.Clients, r.BurstMs, r.RaiseP50Ms, r.RaiseP99Ms, r.RaiseMaxMs, r.ReadyP50Ms, r.ReadyP99Ms, r.ReadyMaxMs, r.FinalLevel,
			r.Passes, r.PassMeanMs, r.QueueMeanMs)
	}
	fmt.Printf("\nall bursts, from each allocation's answer (ms):\n%-14s %6s %11s %9s %9s %9s %9s %9s %9s\n",
		"mode", "bursts", "allocations", "raise p50", "raise p99", "raise max", "ready p50", "ready p99", "ready max")
	var out []autoscaleBenchSummary
	for _, ab := range autoscaleBenchFleets {
		if len(ab.raiseAll) == 0 {
			continue
		}
		s := autoscaleBenchSummary{Mode: ab.mode, Bursts: len(ab.raiseAll) / autoscaleBenchBurst, Allocations: len(ab.raiseAll),
			RaiseP50Ms: quantileMs(ab.raiseAll, 0.5), RaiseP99Ms: quantileMs(ab.raiseAll, 0.99), RaiseMaxMs: quantileMs(ab.raiseAll, 1),
			ReadyP50Ms: quantileMs(ab.readyAll, 0.5), ReadyP99Ms: quantileMs(ab.readyAll, 0.99), ReadyMaxMs: quantileMs(ab.readyAll, 1)}
		out = append(out, s)
		fmt.Printf("%-14s %6d %11d %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", s.Mode, s.Bursts, s.Allocations,
			s.RaiseP50Ms, s.RaiseP99Ms, s.RaiseMaxMs, s.ReadyP50Ms, s.ReadyP99Ms, s.ReadyMaxMs)
		if ab.mode == "events" {
			verdict := "met"
			if s.RaiseP99Ms > 1000 {
				verdict = "missed"
			}
			fmt.Printf("goal, replicas raised within 1 s at p99 on events: %s\n", verdict)
		}
	}
	return out
}

// controllerHistogram reads the count and sum of a histogram of the operator's registry (the
// controller-runtime metrics the suite's manager records), for the series with label = value.
func controllerHistogram(b *testing.B, name, label, value string) (uint64, float64) {
	b.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// newAutoscaleBench builds a fleet of autoscaleBenchServers servers without host ports named
// after the mode, takes autoscaleBenchAllocated of them for matches, starts the watch and creates
// the fleet's autoscaler in syncMode, then waits until the fleet is settled.
func newAutoscaleBench(b *testing.B, mode string, syncMode v1alpha1.FleetAutoscalerSyncMode) *autoscaleBench {
	b.Helper()
	ab := &autoscaleBench{mode: mode, states: map[string]v1alpha1.GameServerState{},
		periodic: syncMode == v1alpha1.FleetAutoscalerSyncInterval}
	ab.fleet = newBenchFleetOf(b, "autoscale-"+strings.ToLower(string(syncMode)), autoscaleBenchServers)
	var g errgroup.Group
	g.SetLimit(autoscaleBenchClients)
	for range autoscaleBenchAllocated {
		g.Go(func() error {
			if st := allocateHTTP(b, ab.fleet.Namespace, v1alpha1.GameServerAllocationSpec{Fleet: ab.fleet.Name}); st.State != v1alpha1.AllocationAllocated {
				return fmt.Errorf("allocation: %+v", st)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	ab.watch(b)
	fas := newBufferAutoscaler(ab.fleet.Namespace, ab.fleet.Name, ab.fleet.Name, intstr.FromString(autoscaleBenchBuffer), 0, 2*autoscaleBenchServers)
	fas.Spec.Sync = v1alpha1.FleetAutoscalerSync{Mode: syncMode, IntervalSeconds: autoscaleBenchPeriod}
	if err := k8s.Create(context.Background(), fas); err != nil {
		b.Fatal(err)
	}
	ab.settle(b)
	return ab
}

// watch starts a cache on the fleet's namespace for the rest of the test binary that records the
// history of the fleet's spec.replicas and of its servers that are up, as `kubectl get -w` would
// see them, and waits for it to sync.
func (ab *autoscaleBench) watch(b *testing.B) {
	b.Helper()
	c, err := cache.New(restCfg, cache.Options{Scheme: testScheme, DefaultNamespaces: map[string]cache.Config{ab.fleet.Namespace: {}}})
	if err != nil {
		b.Fatal(err)
	}
	fleets, err := c.GetInformer(suiteCtx, &v1alpha1.Fleet{})
	if err != nil {
		b.Fatal(err)
	}
	onFleet := func(obj any) {
		if f, ok := obj.(*v1alpha1.Fleet); ok && f.Name == ab.fleet.Name {
			ab.record(&ab.replicas, int(f.Spec.Replicas))
		}
	}
	if _, err := fleets.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onFleet, UpdateFunc: func(_, o any) { onFleet(o) }}); err != nil {
		b.Fatal(err)
	}
	servers, err := c.GetInformer(suiteCtx, &v1alpha1.GameServer{})
	if err != nil {
		b.Fatal(err)
	}
	onServer := func(obj any, deleted bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj, deleted = tomb.Obj, true
		}
		gs, ok := obj.(*v1alpha1.GameServer)
		if !ok || gs.Labels[v1alpha1.LabelFleet] != ab.fleet.Name {
			return
		}
		ab.mu.Lock()
		defer ab.mu.Unlock()
		before := isUp(ab.states[gs.Name])
		if deleted || !gs.DeletionTimestamp.IsZero() {
			delete(ab.states, gs.Name)
		} else {
			ab.states[gs.Name] = gs.Status.State
		}
		if after := isUp(ab.states[gs.Name]); after != before {
			if after {
				ab.upNow++
			} else {
				ab.upNow--
			}
			ab.up = append(ab.up, levelAt{at: time.Now(), level: ab.upNow})
		}
	}
	if _, err := servers.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { onServer(o, false) },
		UpdateFunc: func(_, o any) { onServer(o, false) },
		DeleteFunc: func(o any) { onServer(o, true) },
	}); err != nil {
		b.Fatal(err)
	}
	go func() {
		if err := c.Start(suiteCtx); err != nil {
			fmt.Fprintln(os.Stderr, "autoscaler bench watch:", err)
		}
	}()
	if !c.WaitForCacheSync(suiteCtx) {
		b.Fatal("autoscaler bench watch did not sync")
	}
}

func isUp(s v1alpha1.GameServerState) bool {
	return s == v1alpha1.GameServerStateReady || s == v1alpha1.GameServerStateAllocated
}

// record appends level to a history when it changes.
func (ab *autoscaleBench) record(h *[]levelAt, level int) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if n := len(*h); n == 0 || (*h)[n-1].level != level {
		*h = append(*h, levelAt{at: time.Now(), level: level})
	}
}

// firstAt is when a history first reached level at or after since; zero if it has not.
func (ab *autoscaleBench) firstAt(h []levelAt, level int, since time.Time) time.Time {
	for _, e := range h {
		if !e.at.Before(since) && e.level >= level {
			return e.at
		}
	}
	return time.Time{}
}

// settle waits until the fleet is back at its matches and its buffer: autoscaleBenchServers
// replicas, all up, autoscaleBenchAllocated of them Allocated.
func (ab *autoscaleBench) settle(b *testing.B) {
	b.Helper()
	waitFor(b, 5*time.Minute, fmt.Sprintf("fleet %s settled at %d", ab.fleet.Name, autoscaleBenchServers), func() (bool, error) {
		f := getFleet(b, ab.fleet)
		ab.mu.Lock()
		defer ab.mu.Unlock()
		alloc := 0
		for _, s := range ab.states {
			if s == v1alpha1.GameServerStateAllocated {
				alloc++
			}
		}
		ok := f.Spec.Replicas == autoscaleBenchServers && len(ab.states) == autoscaleBenchServers && ab.upNow == autoscaleBenchServers &&
			alloc == autoscaleBenchAllocated
		return ok, fmt.Errorf("spec.replicas %d, %d servers, %d up, %d Allocated", f.Spec.Replicas, len(ab.states), ab.upNow, alloc)
	})
}

// burst sends autoscaleBenchBurst allocations at the fleet, measures each one's reaction, ends
// the burst's matches and waits until the fleet has settled again (with the timer stopped).
func (ab *autoscaleBench) burst(b *testing.B, hc *http.Client, token string) autoscaleBenchResult {
	if ab.periodic {
		// The fleet settled at the autoscaler's last pass: without a random wait every burst
		// would come at the same moment of the period.
		b.StopTimer()
		time.Sleep(rand.N(autoscaleBenchPeriod * time.Second))
		b.StartTimer()
	}
	body, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ab.fleet.Namespace},
		Spec: v1alpha1.GameServerAllocationSpec{Fleet: ab.fleet.Name}})
	if err != nil {
		b.Fatal(err)
	}
	answered := make([]time.Time, autoscaleBenchBurst)
	names := make([]string, autoscaleBenchBurst)
	passes0, passSum0 := controllerHistogram(b, "controller_runtime_reconcile_time_seconds", "controller", "fleetautoscaler")
	queued0, queueSum0 := controllerHistogram(b, "workqueue_queue_duration_seconds", "name", "fleetautoscaler")
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(autoscaleBenchClients)
	for i := range autoscaleBenchBurst {
		g.Go(func() error {
			name, err := allocateOnce(hc, token, "", body)
			answered[i], names[i] = time.Now(), name
			if err == nil && name == "" {
				err = fmt.Errorf("allocation %d UnAllocated", i)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	burstSpan := time.Since(start)
	slices.SortFunc(answered, time.Time.Compare)

	// The k-th answer leaves autoscaleBenchAllocated+k matches: the buffer wants levels[k-1].
	levels := make([]int, autoscaleBenchBurst)
	policy := v1alpha1.BufferPolicy{BufferSize: intstr.FromString(autoscaleBenchBuffer), MaxReplicas: 2 * autoscaleBenchServers}
	for k := range levels {
		d, err := decideBuffer(policy, int32(autoscaleBenchAllocated+k+1))
		if err != nil {
			b.Fatal(err)
		}
		levels[k] = int(d.replicas)
	}
	final := levels[len(levels)-1]
	limit := 2 * time.Minute
	var raise, ready []time.Duration
	waitFor(b, limit, fmt.Sprintf("fleet %s raised to %d, all up", ab.fleet.Name, final), func() (bool, error) {
		ab.mu.Lock()
		defer ab.mu.Unlock()
		raise, ready = raise[:0], ready[:0]
		for k, at := range answered {
			r, u := ab.firstAt(ab.replicas, levels[k], start), ab.firstAt(ab.up, levels[k], start)
			if r.IsZero() || u.IsZero() {
				return false, fmt.Errorf("allocation %d of %d: spec.replicas raised %v, servers up %v (want %d)", k+1, len(answered), !r.IsZero(), !u.IsZero(), levels[k])
			}
			// The watch may show the raise before the matchmaker has its answer: that counts as 0.
			raise, ready = append(raise, max(0, r.Sub(at))), append(ready, max(0, u.Sub(at)))
		}
		return true, nil
	})
	res := autoscaleBenchResult{
		Mode: ab.mode, Servers: autoscaleBenchServers, Allocated: autoscaleBenchAllocated, Buffer: autoscaleBenchBuffer,
		Allocations: autoscaleBenchBurst, Clients: autoscaleBenchClients, BurstMs: ms(burstSpan),
		RaiseP50Ms: quantileMs(raise, 0.5), RaiseP99Ms: quantileMs(raise, 0.99), RaiseMaxMs: quantileMs(raise, 1),
		ReadyP50Ms: quantileMs(ready, 0.5), ReadyP99Ms: quantileMs(ready, 0.99), ReadyMaxMs: quantileMs(ready, 1),
		FinalLevel: final,
	}
	passes, passSum := controllerHistogram(b, "controller_runtime_reconcile_time_seconds", "controller", "fleetautoscaler")
	queued, queueSum := controllerHistogram(b, "workqueue_queue_duration_seconds", "name", "fleetautoscaler")
	if n := passes - passes0; n > 0 {
		res.Passes, res.PassMeanMs = int(n), (passSum-passSum0)/float64(n)*1000
	}
	if n := queued - queued0; n > 0 {
		res.QueueMeanMs = (queueSum - queueSum0) / float64(n) * 1000
	}
	ab.raiseAll, ab.readyAll = append(ab.raiseAll, raise...), append(ab.readyAll, ready...)

	b.StopTimer()
	defer b.StartTimer()
	var end errgroup.Group
	end.SetLimit(16)
	for _, name := range names {
		end.Go(func() error {
			return kube.finish(context.Background(), types.NamespacedName{Namespace: ab.fleet.Namespace, Name: name}, corev1.PodSucceeded)
		})
	}
	if err := end.Wait(); err != nil {
		b.Fatal(err)
	}
	ab.settle(b)
	return res
}
