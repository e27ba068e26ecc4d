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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/gameserver/lifecycle"
	"github.com/netfleet/netfleet/internal/testenv"
)

// probeAnnotation is the annotation a lifecycle benchmark writes to time the API server's watch.
const probeAnnotation = "bench.netfleet.io/probe"

// lifecycleBench is a namespace of Ready GameServers and the watch that times their changes.
type lifecycleBench struct {
	ns    string
	names []string
	// rounds counts the rounds run, across the benchmark's runs, so that they alternate.
	rounds int

	mu sync.Mutex
	// want[name] is the state the server's last transition asks for, since wantAt[name];
	// probe[name] the probe annotation written at probeAt[name]. stateLat and probeLat collect
	// what the watch showed.
	want     map[string]v1alpha1.GameServerState
	wantAt   map[string]time.Time
	probe    map[string]string
	probeAt  map[string]time.Time
	stateLat []time.Duration
	probeLat []time.Duration
}

var (
	lifecycleBenches   = map[int]*lifecycleBench{}
	lifecycleResults   = map[string]lifecycleResult{}
	lifecycleResultsMu sync.Mutex
)

// lifecycleResult is one run's summary, as written to _out/bench/operator-lifecycle.json.
type lifecycleResult struct {
	Servers     int `json:"servers"`
	Transitions int `json:"transitions"`
	// P50Ms and P99Ms: from the game's lifecycle call to a watch showing the GameServer's new
	// state (the process's long-poll answer, the operator's reconcile and status patch, and the
	// watch delivery).
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	// WatchP50Ms and WatchP99Ms: from a burst of as many patches of the GameServers asked for to
	// the same watch showing each, in the same rounds — the API server's own share.
	WatchP50Ms float64 `json:"watchP50Ms"`
	WatchP99Ms float64 `json:"watchP99Ms"`
}

// BenchmarkLifecycleTransition measures the time from a game's lifecycle call (Reserve, then
// Ready, alternating per round) on every server of a Ready fleet at once to a watch showing the
// GameServer's state change, at 1 and at 200 servers; in the same rounds, once the changes are
// shown, it asks for a patch of an annotation of every server at once (sent by as many writers
// as the operator has reconcile workers) and times, from that moment, the same watch showing
// each: the API server's own latency for the same burst of writes.
func BenchmarkLifecycleTransition(b *testing.B) {
	for _, n := range []int{1, 200} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			f := lifecycleBenches[n]
			if f == nil {
				f = newLifecycleBench(b, n)
				lifecycleBenches[n] = f
			}
			f.mu.Lock()
			f.stateLat, f.probeLat = f.stateLat[:0], f.probeLat[:0]
			f.mu.Unlock()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f.round(b, f.rounds)
				f.rounds++
			}
			b.StopTimer()
			f.mu.Lock()
			res := lifecycleResult{
				Servers: n, Transitions: len(f.stateLat),
				P50Ms: quantileMs(f.stateLat, 0.50), P99Ms: quantileMs(f.stateLat, 0.99), MaxMs: quantileMs(f.stateLat, 1),
				WatchP50Ms: quantileMs(f.probeLat, 0.50), WatchP99Ms: quantileMs(f.probeLat, 0.99),
			}
			f.mu.Unlock()
			b.ReportMetric(res.P50Ms, "p50-ms")
			b.ReportMetric(res.P99Ms, "p99-ms")
			b.ReportMetric(res.WatchP50Ms, "watch-p50-ms")
			b.ReportMetric(res.WatchP99Ms, "watch-p99-ms")
			writeLifecycleResult(b, res)
		})
	}
}

func newLifecycleBench(b *testing.B, n int) *lifecycleBench {
	b.Helper()
	ctx := context.Background()
	f := &lifecycleBench{
		ns:   newNamespace(b),
		want: map[string]v1alpha1.GameServerState{}, wantAt: map[string]time.Time{},
		probe: map[string]string{}, probeAt: map[string]time.Time{},
	}
	for i := range n {
		f.names = append(f.names, fmt.Sprintf("gs-%04d", i))
	}
	startWatch(b, f.ns, map[client.Object]func(any){&v1alpha1.GameServer{}: func(obj any) {
		gs, ok := obj.(*v1alpha1.GameServer)
		if !ok {
			return
		}
		now := time.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		if want, ok := f.want[gs.Name]; ok && gs.Status.State == want {
			f.stateLat = append(f.stateLat, now.Sub(f.wantAt[gs.Name]))
			delete(f.want, gs.Name)
		}
		if v, ok := f.probe[gs.Name]; ok && gs.Annotations[probeAnnotation] == v {
			f.probeLat = append(f.probeLat, now.Sub(f.probeAt[gs.Name]))
			delete(f.probe, gs.Name)
		}
	}})
	var g errgroup.Group
	g.SetLimit(16)
	for _, name := range f.names {
		g.Go(func() error { return k8s.Create(ctx, newGameServer(f.ns, name, v1alpha1.PortPolicyDynamic, 0)) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	waitFor(b, 10*time.Minute, fmt.Sprintf("%d GameServers Ready", n), func() (bool, error) {
		var list v1alpha1.GameServerList
		if err := k8s.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, gs := range list.Items {
			if gs.Status.State == v1alpha1.GameServerStateReady {
				ready++
			}
		}
		return ready == n, fmt.Errorf("%d of %d ready", ready, n)
	})
	return f
}

// round makes every server's game call Reserve (even rounds) or Ready (odd rounds), patches the
// probe annotation of every server, and waits until the watch showed every change.
func (f *lifecycleBench) round(b *testing.B, i int) {
	b.Helper()
	ctx := context.Background()
	want := v1alpha1.GameServerStateReserved
	if i%2 == 1 {
		want = v1alpha1.GameServerStateReady
	}
	lcs := make([]*lifecycle.Lifecycle, len(f.names))
	for j, name := range f.names {
		run := kube.pod(types.NamespacedName{Namespace: f.ns, Name: name})
		if run == nil || run.current() == nil {
			b.Fatalf("no process for %s", name)
		}
		lcs[j] = run.current().lc
	}
	for j, name := range f.names {
		f.mu.Lock()
		f.want[name], f.wantAt[name] = want, time.Now()
		f.mu.Unlock()
		var err error
		if want == v1alpha1.GameServerStateReserved {
			err = lcs[j].Reserve(time.Hour)
		} else {
			err = lcs[j].Ready()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	f.wait(b, "every state change shown by the watch")
	// The probes follow once the transitions are shown: an annotation patch in flight would
	// make the operator's status patch (guarded by the resourceVersion) conflict and retry.
	// Like the transitions, all probes are asked for at once and timed from then; 32 writers,
	// as many as the operator's reconcile workers, send them.
	v := fmt.Sprintf("%d", i)
	burst := time.Now()
	f.mu.Lock()
	for _, name := range f.names {
		f.probe[name], f.probeAt[name] = v, burst
	}
	f.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(operator.opts.MaxConcurrentReconciles)
	for _, name := range f.names {
		g.Go(func() error {
			gs := &v1alpha1.GameServer{}
			gs.Namespace, gs.Name = f.ns, name
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, probeAnnotation, v)
			return k8s.Patch(ctx, gs, client.RawPatch(types.MergePatchType, patch))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	f.wait(b, "every probe shown by the watch")
}

// wait waits until the watch has shown every pending state change and probe.
func (f *lifecycleBench) wait(b *testing.B, what string) {
	b.Helper()
	waitFor(b, 5*time.Minute, what, func() (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.want) == 0 && len(f.probe) == 0, fmt.Errorf("%d states, %d probes pending", len(f.want), len(f.probe))
	})
}

// writeLifecycleResult prints the results so far as a table and writes them as JSON.
func writeLifecycleResult(b *testing.B, res lifecycleResult) {
	b.Helper()
	lifecycleResultsMu.Lock()
	defer lifecycleResultsMu.Unlock()
	lifecycleResults[fmt.Sprintf("servers=%04d", res.Servers)] = res
	fmt.Printf("\n%-8s %11s %8s %8s %8s %10s %10s\n", "servers", "transitions", "p50 ms", "p99 ms", "max ms", "watch p50", "watch p99")
	keys := make([]string, 0, len(lifecycleResults))
	for k := range lifecycleResults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := lifecycleResults[k]
		fmt.Printf("%-8d %11d %8.1f %8.1f %8.1f %10.1f %10.1f\n", r.Servers, r.Transitions, r.P50Ms, r.P99Ms, r.MaxMs, r.WatchP50Ms, r.WatchP99Ms)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, "_out", "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	raw, err := json.MarshalIndent(lifecycleResults, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "operator-lifecycle.json"), append(raw, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
}
