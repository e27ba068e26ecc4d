package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/testenv"
)

// benchFleet is a namespace of Ready GameServers, each with a real admin server, and a watch on
// their status. Fleets are built once per test binary and reused by every run of a benchmark.
type benchFleet struct {
	ns    string
	names []string

	mu sync.Mutex
	// appliedAt[name][generation] is when the watch first showed that applied generation.
	appliedAt map[string]map[int64]time.Time
}

var (
	benchFleets   = map[int]*benchFleet{}
	benchResults  = map[string]benchResult{}
	benchResultMu sync.Mutex
)

// benchResult is one run's summary, as written to _out/bench/operator-config-propagation.json.
type benchResult struct {
	Servers    int     `json:"servers"`
	Edits      int     `json:"edits"`
	P50Ms      float64 `json:"p50Ms"`
	P90Ms      float64 `json:"p90Ms"`
	P99Ms      float64 `json:"p99Ms"`
	MaxMs      float64 `json:"maxMs"`
	EditSpanMs float64 `json:"editSpanMs"`
	ConvergeMs float64 `json:"convergeMs"`
	// OperatorMeanMs is netfleet_operator_config_propagation_seconds' mean over the run: from
	// the reconciler first seeing a generation to the server applying it.
	OperatorMeanMs          float64 `json:"operatorMeanMs"`
	MaxConcurrentReconciles int     `json:"maxConcurrentReconciles"`
}

// BenchmarkConfigPropagation edits spec.netcode of every GameServer of a Ready fleet at once and
// measures, per server, the time from its edit (the API server accepted it) to a watch showing
// status.netcode.appliedGeneration at the new generation: reconcile, push to the process, apply
// at a tick boundary, status patch and watch delivery.
func BenchmarkConfigPropagation(b *testing.B) {
	for _, n := range []int{200, 1000} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			f := benchFleets[n]
			if f == nil {
				f = newBenchFleet(b, n)
				benchFleets[n] = f
			}
			var lat []time.Duration
			var span, converge time.Duration
			count0, sum0 := histogramCountSum(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, s, c := f.editRound(b)
				lat = append(lat, l...)
				span, converge = max(span, s), max(converge, c)
			}
			b.StopTimer()
			count1, sum1 := histogramCountSum(b)
			slices.Sort(lat)
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
			}
			res := benchResult{
				Servers: n, Edits: len(lat), P50Ms: q(0.50), P90Ms: q(0.90), P99Ms: q(0.99), MaxMs: q(1),
				EditSpanMs: ms(span), ConvergeMs: ms(converge), MaxConcurrentReconciles: operator.opts.MaxConcurrentReconciles,
			}
			if count1 > count0 {
				res.OperatorMeanMs = (sum1 - sum0) / float64(count1-count0) * 1000
			}
			b.ReportMetric(res.P50Ms, "p50-ms")
			b.ReportMetric(res.P99Ms, "p99-ms")
			b.ReportMetric(res.MaxMs, "max-ms")
			b.ReportMetric(res.ConvergeMs, "converge-ms")
			writeBenchResult(b, res)
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func histogramCountSum(b *testing.B) (uint64, float64) {
	b.Helper()
	m := histogramMetric(b, configPropagation)
	return m.GetSampleCount(), m.GetSampleSum()
}

func newBenchFleet(b *testing.B, n int) *benchFleet {
	b.Helper()
	ctx := context.Background()
	f := &benchFleet{ns: newNamespace(b), appliedAt: map[string]map[int64]time.Time{}}
	for i := range n {
		f.names = append(f.names, fmt.Sprintf("gs-%04d", i))
	}
	// The watch the measurement reads, as `kubectl get -w` would see it.
	c, err := cache.New(restCfg, cache.Options{Scheme: testScheme, DefaultNamespaces: map[string]cache.Config{f.ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := c.GetInformer(ctx, &v1alpha1.GameServer{})
	if err != nil {
		b.Fatal(err)
	}
	record := func(obj any) {
		gs, ok := obj.(*v1alpha1.GameServer)
		if !ok {
			return
		}
		now := time.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		m := f.appliedAt[gs.Name]
		if m == nil {
			m = map[int64]time.Time{}
			f.appliedAt[gs.Name] = m
		}
		if _, seen := m[gs.Status.Netcode.AppliedGeneration]; !seen {
			m[gs.Status.Netcode.AppliedGeneration] = now
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	// The cache runs for the rest of the test binary, like the fleet.
	go func() {
		if err := c.Start(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}

	start := time.Now()
	var g errgroup.Group
	g.SetLimit(16)
	for _, name := range f.names {
		g.Go(func() error {
			return k8s.Create(ctx, newGameServer(f.ns, name, v1alpha1.PortPolicyDynamic, 0))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	waitFor(b, 15*time.Minute, fmt.Sprintf("%d GameServers Ready", n), func() (bool, error) {
		var list v1alpha1.GameServerList
		if err := k8s.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, gs := range list.Items {
			if gs.Status.State == v1alpha1.GameServerStateReady && gs.Status.Netcode.AppliedGeneration == gs.Generation {
				ready++
			}
		}
		return ready == n, fmt.Errorf("%d of %d ready", ready, n)
	})
	fmt.Printf("fleet of %d GameServers Ready in %s\n", n, time.Since(start).Round(time.Millisecond))
	return f
}

// editRound edits every server's tick rate at once (32 editors) and waits until every server
// applied its edit. It returns each server's edit-to-applied latency, the span of the edits, and
// the time from the first edit until the last server applied.
func (f *benchFleet) editRound(b *testing.B) ([]time.Duration, time.Duration, time.Duration) {
	b.Helper()
	ctx := context.Background()
	type edit struct {
		gen int64
		at  time.Time
	}
	edits := make([]edit, len(f.names))
	first := time.Now()
	var g errgroup.Group
	g.SetLimit(32)
	for i, name := range f.names {
		g.Go(func() error {
			gs := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(gs), gs); err != nil {
				return err
			}
			// A different tick rate each round, so every edit is a real config change.
			rate := 20 + (gs.Spec.Netcode.TickRateHz-19)%100
			patch := fmt.Appendf(nil, `{"spec":{"netcode":{"tickRateHz":%d}}}`, rate)
			if err := k8s.Patch(ctx, gs, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return err
			}
			edits[i] = edit{gen: gs.Generation, at: time.Now()}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	span := time.Since(first)

	lat := make([]time.Duration, len(f.names))
	var last time.Time
	waitFor(b, 5*time.Minute, "every server to apply its edit", func() (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		pending := 0
		for i, name := range f.names {
			var at time.Time
			for gen, t := range f.appliedAt[name] {
				if gen >= edits[i].gen && (at.IsZero() || t.Before(at)) {
					at = t
				}
			}
			if at.IsZero() {
				pending++
				continue
			}
			lat[i] = at.Sub(edits[i].at)
			if at.After(last) {
				last = at
			}
		}
		return pending == 0, fmt.Errorf("%d servers pending", pending)
	})
	return lat, span, last.Sub(first)
}

// writeBenchResult prints the results so far as a table and writes them as JSON.
func writeBenchResult(b *testing.B, res benchResult) {
	b.Helper()
	benchResultMu.Lock()
	defer benchResultMu.Unlock()
	benchResults[fmt.Sprintf("servers=%d", res.Servers)] = res
	fmt.Printf("\n%-8s %6s %8s %8s %8s %8s %10s %11s %12s\n", "servers", "edits", "p50 ms", "p90 ms", "p99 ms", "max ms", "edits ms", "converge ms", "operator ms")
	keys := make([]string, 0, len(benchResults))
	for k := range benchResults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := benchResults[k]
		fmt.Printf("%-8d %6d %8.1f %8.1f %8.1f %8.1f %10.1f %11.1f %12.1f\n", r.Servers, r.Edits, r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs, r.EditSpanMs, r.ConvergeMs, r.OperatorMeanMs)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, "_out", "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	raw, err := json.MarshalIndent(benchResults, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "operator-config-propagation.json"), append(raw, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
}
