package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	// appliedAt[name][generation] is when the watch first showed that applied generation;
	// seenAt[name][generation] when it first showed that metadata.generation.
	appliedAt map[string]map[int64]time.Time
	seenAt    map[string]map[int64]time.Time
	// rate is each server's current tick rate.
	rate map[string]int32
}

var (
	benchFleets   = map[int]*benchFleet{}
	benchResults  = map[string]benchResult{}
	benchResultMu sync.Mutex
)

// benchResult is one run's summary, as written to _out/bench/operator-config-propagation.json.
type benchResult struct {
	Servers int `json:"servers"`
	// Pace is "burst" (all edits at once, 32 editors), "serial" (one editor, one edit after
	// another) or the edit rate, e.g. "50/s".
	Pace  string  `json:"pace"`
	Edits int     `json:"edits"`
	P50Ms float64 `json:"p50Ms"`
	P90Ms float64 `json:"p90Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	// WatchP50Ms and WatchP99Ms: from an edit accepted to the watch showing its generation, the
	// API server's share of the latency before the operator can act.
	WatchP50Ms float64 `json:"watchP50Ms"`
	WatchP99Ms float64 `json:"watchP99Ms"`
	// EditSpanMs is how long issuing the edits took; ConvergeMs, from the first edit to the last
	// server applying.
	EditSpanMs float64 `json:"editSpanMs"`
	ConvergeMs float64 `json:"convergeMs"`
	// OperatorMeanMs is netfleet_operator_config_propagation_seconds' mean over the run: from
	// the reconciler first seeing a generation to the server applying it.
	OperatorMeanMs float64 `json:"operatorMeanMs"`
	// APIServerCPUMsPerEdit is the API server's CPU time over the run per edit (the edit and
	// the operator's status patch): what bounds a burst on a small machine.
	APIServerCPUMsPerEdit float64 `json:"apiServerCpuMsPerEdit"`
	// EtcdCPUMsPerEdit and TestProcessCPUMsPerEdit: the same for etcd and for this process (the
	// operator, the fake kubelet, the servers' admin APIs and the measuring watch).
	EtcdCPUMsPerEdit        float64 `json:"etcdCpuMsPerEdit"`
	TestProcessCPUMsPerEdit float64 `json:"testProcessCpuMsPerEdit"`
	MaxConcurrentReconciles int     `json:"maxConcurrentReconciles"`
}

// BenchmarkConfigPropagation edits spec.netcode of every GameServer of a Ready fleet and
// measures, per server, the time from its edit (the API server accepted it) to a watch showing
// status.netcode.appliedGeneration at the new generation: watch delivery to the operator,
// reconcile, push to the process, apply at a tick boundary, status patch and watch delivery. The
// edits come all at once (burst: the API server's write throughput decides) or paced at 50 per
// second (the operator's own latency), or one after another by a single editor, each as soon as
// the previous one was accepted (a script editing every server in turn).
func BenchmarkConfigPropagation(b *testing.B) {
	for _, n := range []int{200, 1000} {
		for _, p := range []editPace{{name: "burst", editors: 32}, {name: "serial", editors: 1}, {name: "50-per-s", editors: 32, rate: 50}} {
			pace := p.name
			b.Run(fmt.Sprintf("servers=%d/edits=%s", n, pace), func(b *testing.B) {
				f := benchFleets[n]
				if f == nil {
					f = newBenchFleet(b, n)
					benchFleets[n] = f
				}
				var lat, watch []time.Duration
				var span, converge time.Duration
				count0, sum0 := histogramCountSum(b)
				api0, etcd0, self0 := apiServerCPU(b), childCPU(b, "etcd"), childCPU(b, "self")
				req0 := readAPIRequests(b)
				profiled := apiServerProfile(b, b.Name())
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r := f.editRound(b, p)
					lat, watch = append(lat, r.latency...), append(watch, r.watch...)
					span, converge = max(span, r.span), max(converge, r.converge)
				}
				b.StopTimer()
				count1, sum1 := histogramCountSum(b)
				api1, etcd1, self1 := apiServerCPU(b), childCPU(b, "etcd"), childCPU(b, "self")
				fmt.Printf("API requests per edit: %s\n", readAPIRequests(b).per(req0, len(lat)))
				profiled()
				res := benchResult{
					Servers: n, Pace: strings.ReplaceAll(pace, "-per-", "/"), Edits: len(lat),
					P50Ms: quantileMs(lat, 0.50), P90Ms: quantileMs(lat, 0.90), P99Ms: quantileMs(lat, 0.99), MaxMs: quantileMs(lat, 1),
					WatchP50Ms: quantileMs(watch, 0.50), WatchP99Ms: quantileMs(watch, 0.99),
					EditSpanMs: ms(span), ConvergeMs: ms(converge), MaxConcurrentReconciles: operator.opts.MaxConcurrentReconciles,
				}
				if count1 > count0 {
					res.OperatorMeanMs = (sum1 - sum0) / float64(count1-count0) * 1000
				}
				res.APIServerCPUMsPerEdit = ms(api1-api0) / float64(len(lat))
				res.EtcdCPUMsPerEdit = ms(etcd1-etcd0) / float64(len(lat))
				res.TestProcessCPUMsPerEdit = ms(self1-self0) / float64(len(lat))
				fmt.Printf("CPU per edit: API server %.1f ms, etcd %.1f ms, this process (operator, kubelet, servers, watch) %.1f ms\n",
					res.APIServerCPUMsPerEdit, res.EtcdCPUMsPerEdit, res.TestProcessCPUMsPerEdit)
				b.ReportMetric(res.P50Ms, "p50-ms")
				b.ReportMetric(res.P99Ms, "p99-ms")
				b.ReportMetric(res.MaxMs, "max-ms")
				b.ReportMetric(res.ConvergeMs, "converge-ms")
				writeBenchResult(b, res)
			})
		}
	}
}

// startWatch starts a cache on namespace ns for the rest of the test binary, calling each
// object kind's record with every object it adds or updates, and waits for it to sync.
func startWatch(b *testing.B, ns string, record map[client.Object]func(any)) {
	b.Helper()
	c, err := cache.New(restCfg, cache.Options{Scheme: testScheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	for obj, fn := range record {
		inf, err := c.GetInformer(suiteCtx, obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: fn, UpdateFunc: func(_, o any) { fn(o) }}); err != nil {
			b.Fatal(err)
		}
	}
	go func() {
		if err := c.Start(suiteCtx); err != nil {
			fmt.Fprintln(os.Stderr, "bench watch:", err)
		}
	}()
	if !c.WaitForCacheSync(suiteCtx) {
		b.Fatal("bench watch did not sync")
	}
}

// firstSeen records at in m[name][key] unless a time is there already.
func firstSeen[K comparable](m map[string]map[K]time.Time, name string, key K, at time.Time) {
	byKey := m[name]
	if byKey == nil {
		byKey = map[K]time.Time{}
		m[name] = byKey
	}
	if _, seen := byKey[key]; !seen {
		byKey[key] = at
	}
}

// quantileMs is the q-quantile of d in milliseconds; it sorts d.
func quantileMs(d []time.Duration, q float64) float64 {
	slices.Sort(d)
	return ms(d[min(len(d)-1, int(q*float64(len(d))))])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// apiServerCPU is the CPU time used so far by the test's kube-apiserver, a child of this
// process, read from /proc.
func apiServerCPU(b *testing.B) time.Duration {
	b.Helper()
	return childCPU(b, "kube-apiserver")
}

// childCPU is the CPU time used so far by this process's child named comm ("self" for this
// process), read from /proc.
func childCPU(b *testing.B, comm string) time.Duration {
	b.Helper()
	if comm == "self" {
		return procCPU(b, "/proc/self/stat")
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		_, f, ok := parseStat(raw)
		if !ok || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if name, _, _ := parseStat(raw); name == comm {
			return procCPU(b, filepath.Join("/proc", d.Name(), "stat"))
		}
	}
	b.Fatalf("no %s child process", comm)
	return 0
}

// parseStat splits /proc/<pid>/stat into the command and the fields after it.
func parseStat(raw []byte) (string, []string, bool) {
	end := bytes.LastIndexByte(raw, ')')
	start := bytes.IndexByte(raw, '(')
	if start < 0 || end < start {
		return "", nil, false
	}
	f := strings.Fields(string(raw[end+1:]))
	return string(raw[start+1 : end]), f, len(f) >= 13
}

// procCPU reads utime+stime of one /proc/<pid>/stat.
func procCPU(b *testing.B, path string) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	_, f, ok := parseStat(raw)
	if !ok {
		b.Fatalf("parse %s", raw)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse %s", raw)
	}
	// Clock ticks of 1/100 s, as on every Linux this runs on.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func histogramCountSum(b *testing.B) (uint64, float64) {
	b.Helper()
	m := histogramMetric(b, configPropagation)
	return m.GetSampleCount(), m.GetSampleSum()
}

func newBenchFleet(b *testing.B, n int) *benchFleet {
	b.Helper()
	ctx := context.Background()
	f := &benchFleet{
		ns:        newNamespace(b),
		appliedAt: map[string]map[int64]time.Time{},
		seenAt:    map[string]map[int64]time.Time{},
		rate:      map[string]int32{},
	}
	for i := range n {
		name := fmt.Sprintf("gs-%04d", i)
		f.names = append(f.names, name)
		f.rate[name] = 60
	}
	// The watch the measurement reads, as `kubectl get -w` would see it.
	startWatch(b, f.ns, map[client.Object]func(any){&v1alpha1.GameServer{}: func(obj any) {
		gs, ok := obj.(*v1alpha1.GameServer)
		if !ok {
			return
		}
		now := time.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		firstSeen(f.appliedAt, gs.Name, gs.Status.Netcode.AppliedGeneration, now)
		firstSeen(f.seenAt, gs.Name, gs.Generation, now)
	}})

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
	waitFor(b, 10*time.Minute, fmt.Sprintf("%d GameServers Ready", n), func() (bool, error) {
		if err := kube.errors(); err != nil {
			b.Fatalf("fake kubelet: %v", err)
		}
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

// roundResult is what one edit round measured.
type roundResult struct {
	latency, watch []time.Duration
	span, converge time.Duration
}

// editPace is how a round's edits are issued: by editors at once, each issuing its next edit as
// soon as the last was accepted, or, when rate is set, rate edits per second.
type editPace struct {
	name          string
	editors, rate int
}

// editRound edits every server's tick rate at the pace p and waits until every server applied
// its edit.
func (f *benchFleet) editRound(b *testing.B, p editPace) roundResult {
	b.Helper()
	ctx := context.Background()
	type edit struct {
		gen int64
		at  time.Time
	}
	edits := make([]edit, len(f.names))
	first := time.Now()
	var g errgroup.Group
	g.SetLimit(p.editors)
	for i, name := range f.names {
		if p.rate > 0 {
			time.Sleep(time.Until(first.Add(time.Duration(i) * time.Second / time.Duration(p.rate))))
		}
		// A different tick rate each round, so every edit is a real config change.
		tick := 20 + (f.rate[name]-19)%100
		f.rate[name] = tick
		g.Go(func() error {
			gs := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
			patch := fmt.Appendf(nil, `{"spec":{"netcode":{"tickRateHz":%d}}}`, tick)
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
	r := roundResult{span: time.Since(first), latency: make([]time.Duration, len(f.names)), watch: make([]time.Duration, len(f.names))}
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
			r.latency[i] = at.Sub(edits[i].at)
			// The watch may show the edit before the editor has its answer: that counts as 0.
			r.watch[i] = max(0, f.seenAt[name][edits[i].gen].Sub(edits[i].at))
			if at.After(last) {
				last = at
			}
		}
		return pending == 0, fmt.Errorf("%d servers pending", pending)
	})
	r.converge = last.Sub(first)
	return r
}

// writeBenchResult prints the results so far as a table and writes them as JSON.
func writeBenchResult(b *testing.B, res benchResult) {
	b.Helper()
	benchResultMu.Lock()
	defer benchResultMu.Unlock()
	benchResults[fmt.Sprintf("servers=%04d/%s", res.Servers, res.Pace)] = res
	fmt.Printf("\n%-8s %-6s %6s %8s %8s %8s %8s %9s %9s %9s %9s %9s %12s\n", "servers", "pace", "edits",
		"p50 ms", "p90 ms", "p99 ms", "max ms", "watch p50", "watch p99", "edits ms", "conv. ms", "oper. ms", "api cpu/edit")
	keys := make([]string, 0, len(benchResults))
	for k := range benchResults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := benchResults[k]
		fmt.Printf("%-8d %-6s %6d %8.1f %8.1f %8.1f %8.1f %9.1f %9.1f %9.1f %9.1f %9.1f %12.1f\n", r.Servers, r.Pace, r.Edits,
			r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs, r.WatchP50Ms, r.WatchP99Ms, r.EditSpanMs, r.ConvergeMs, r.OperatorMeanMs, r.APIServerCPUMsPerEdit)
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
