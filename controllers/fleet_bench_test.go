package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/testenv"
)

// Benchmark fleets are built once per test binary and reused by every run of their benchmark.
// Their runs accumulate over -count, for the table and the JSON.
var (
	allocBenchFleet   *v1alpha1.Fleet
	netcodeBenchFleet *netcodeBench
	allocBenchRuns    []allocBenchResult
	netcodeBenchRuns  []netcodeBenchResult
)

const (
	// allocBenchServers is the size of the allocation benchmark's fleet; each round allocates
	// allocBenchRound of them, so candidates remain to the end, then ends those matches.
	allocBenchServers = 500
	allocBenchRound   = 400
	// allocBenchClients is how many matchmaker connections send allocations at once.
	allocBenchClients = 16
	// netcodeBenchServers is the size of the netcode benchmark's fleet, netcodeBenchAllocated
	// of them Allocated.
	netcodeBenchServers   = 200
	netcodeBenchAllocated = 50
)

// newBenchFleetOf creates a fleet of n servers without host ports (so that rounds of
// replacements do not use up the port range) and waits until all are Ready.
func newBenchFleetOf(b *testing.B, name string, n int32) *v1alpha1.Fleet {
	b.Helper()
	ns := newNamespace(b)
	f := newFleet(ns, name, n)
	f.Spec.Template.Spec.Ports[0].PortPolicy = v1alpha1.PortPolicyNone
	start := time.Now()
	if err := k8s.Create(context.Background(), f); err != nil {
		b.Fatal(err)
	}
	waitFleetAt(b, f, n, 15*time.Minute)
	fmt.Printf("fleet of %d servers Ready in %s\n", n, time.Since(start).Round(time.Millisecond))
	return f
}

// waitFleetAt waits until the fleet's status shows n servers, all Ready.
func waitFleetAt(b *testing.B, f *v1alpha1.Fleet, n int32, timeout time.Duration) {
	b.Helper()
	waitFor(b, timeout, fmt.Sprintf("fleet %s with %d Ready servers", f.Name, n), func() (bool, error) {
		st := getFleet(b, f).Status
		return st.Replicas == n && st.ReadyReplicas == n, fmt.Errorf("status %+v", st)
	})
}

// allocBenchResult is one run of BenchmarkAllocation, as written to
// _out/bench/fleet-allocation.json.
type allocBenchResult struct {
	// Mode is "endpoint" (allocations through the allocator endpoint) or "status-writes" (the
	// baseline: the same clients write the Allocated state of listed Ready servers directly,
	// with the same resourceVersion guard, so the difference is the allocator's own cost).
	Mode           string  `json:"mode"`
	Servers        int     `json:"servers"`
	Allocations    int     `json:"allocations"`
	Clients        int     `json:"clients"`
	PerSecond      float64 `json:"allocationsPerSecond"`
	P50Ms          float64 `json:"p50Ms"`
	P90Ms          float64 `json:"p90Ms"`
	P99Ms          float64 `json:"p99Ms"`
	MaxMs          float64 `json:"maxMs"`
	Conflicts      float64 `json:"conflicts"`
	DoubleAllocs   int     `json:"doubleAllocations"`
	UnAllocated    int     `json:"unAllocated"`
	AllocatedInAPI int     `json:"allocatedInAPIServer"`
}

// BenchmarkAllocation allocates from a fleet of 500 Ready servers through the allocator endpoint,
// 16 matchmaker connections at once, and reports each allocation's latency (request to answer)
// and the sustained rate over the round. Every round checks that no server was handed out twice,
// both in the answers and in the API server, then ends the matches so the fleet refills. Each
// iteration runs a round of the endpoint and then a round of the status-writes baseline, which
// does the writes alone, as fast as the API server takes them: the API server grows slower over
// rounds as matches end and servers are replaced (its heap grew from 440 to 840 MB, and its CPU
// per allocation from 7.5 to 9.9 ms, over four rounds), so the two alternate and see the same
// mix of its states.
func BenchmarkAllocation(b *testing.B) {
	f, token, body, hc := allocBench(b)
	endpoint := func() func() (string, error) {
		return func() (string, error) { return allocateOnce(hc, token, "", body) }
	}
	statusWrites := func() func() (string, error) {
		ready := make(chan *v1alpha1.GameServer, allocBenchServers)
		for _, gs := range fleetServers(b, f) {
			if gs.Status.State == v1alpha1.GameServerStateReady {
				ready <- gs
			}
		}
		close(ready)
		return func() (string, error) {
			gs := <-ready
			patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"status":{"state":%q}}`, gs.ResourceVersion, v1alpha1.GameServerStateAllocated)
			return gs.Name, k8s.Status().Patch(context.Background(), gs, client.RawPatch(types.MergePatchType, patch))
		}
	}
	first := len(allocBenchRuns)
	for b.Loop() {
		allocBenchRuns = append(allocBenchRuns, allocationRound(b, f, "endpoint", endpoint()))
		allocBenchRuns = append(allocBenchRuns, allocationRound(b, f, "status-writes", statusWrites()))
	}
	// The metrics are the means of this run's rounds.
	var rate, base, p50, p99, double, n float64
	for _, r := range allocBenchRuns[first:] {
		if r.Mode != "endpoint" {
			base += r.PerSecond
			continue
		}
		rate, p50, p99, double, n = rate+r.PerSecond, p50+r.P50Ms, p99+r.P99Ms, double+float64(r.DoubleAllocs), n+1
	}
	b.ReportMetric(rate/n, "allocs/s")
	b.ReportMetric(base/n, "baseline-allocs/s")
	b.ReportMetric(p50/n, "p50-ms")
	b.ReportMetric(p99/n, "p99-ms")
	b.ReportMetric(double, "double-allocs")
	fmt.Printf("\n%-14s %-8s %6s %8s %9s %8s %8s %8s %8s %10s %7s\n", "mode", "servers", "allocs", "clients", "allocs/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "conflicts", "double")
	for _, r := range allocBenchRuns {
		fmt.Printf("%-14s %-8d %6d %8d %9.1f %8.1f %8.1f %8.1f %8.1f %10.0f %7d\n", r.Mode, r.Servers, r.Allocations, r.Clients, r.PerSecond, r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs, r.Conflicts, r.DoubleAllocs)
	}
	writeFleetBench(b, "fleet-allocation.json", allocBenchRuns)
}

// allocBench returns the allocation benchmarks' fleet (built on first use), the endpoint's
// token, a request for a server of the fleet, and an HTTP client with a connection per
// matchmaker.
func allocBench(b *testing.B) (*v1alpha1.Fleet, string, []byte, *http.Client) {
	b.Helper()
	if allocBenchFleet == nil {
		allocBenchFleet = newBenchFleetOf(b, "alloc-bench", allocBenchServers)
	}
	f := allocBenchFleet
	body, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace},
		Spec: v1alpha1.GameServerAllocationSpec{Fleet: f.Name}})
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: allocBenchClients}, Timeout: 30 * time.Second}
	return f, allocatorToken(b), body, hc
}

// BenchmarkAllocationKeyed is BenchmarkAllocation's endpoint round with an Idempotency-Key on
// every request, each its own: what retry safety costs (a record created, served by the leader's
// allocation controller and polled, against one status write).
func BenchmarkAllocationKeyed(b *testing.B) {
	f, token, body, hc := allocBench(b)
	var keys atomic.Int64
	first := len(allocBenchRuns)
	for b.Loop() {
		allocBenchRuns = append(allocBenchRuns, allocationRound(b, f, "endpoint-keyed", func() (string, error) {
			return allocateOnce(hc, token, fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), keys.Add(1)), body)
		}))
	}
	var rate, p50, p99 float64
	runs := allocBenchRuns[first:]
	for _, r := range runs {
		rate, p50, p99 = rate+r.PerSecond, p50+r.P50Ms, p99+r.P99Ms
	}
	n := float64(len(runs))
	b.ReportMetric(rate/n, "allocs/s")
	b.ReportMetric(p50/n, "p50-ms")
	b.ReportMetric(p99/n, "p99-ms")
	writeFleetBench(b, "fleet-allocation.json", allocBenchRuns)
}

// allocationRound runs one round of allocBenchRound allocations by allocBenchClients clients
// through allocate, checks it, then ends the matches and waits for the fleet to refill (with the
// timer stopped).
func allocationRound(b *testing.B, f *v1alpha1.Fleet, mode string, allocate func() (string, error)) allocBenchResult {
	req0, api0 := readAPIRequests(b), apiServerCPU(b)
	conflicts0 := counterValue(b, allocationConflicts)
	lat := make([]time.Duration, allocBenchRound)
	names := make([]string, allocBenchRound)
	var next int
	var mu sync.Mutex
	var g errgroup.Group
	start := time.Now()
	for range allocBenchClients {
		g.Go(func() error {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= allocBenchRound {
					return nil
				}
				t0 := time.Now()
				name, err := allocate()
				lat[i], names[i] = time.Since(t0), name
				if err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	wall := time.Since(start)
	res := allocBenchResult{Mode: mode, Servers: allocBenchServers, Allocations: allocBenchRound, Clients: allocBenchClients,
		PerSecond: allocBenchRound / wall.Seconds(), Conflicts: counterValue(b, allocationConflicts) - conflicts0}
	seen := map[string]bool{}
	for _, n := range names {
		switch {
		case n == "":
			res.UnAllocated++
		case seen[n]:
			res.DoubleAllocs++
		default:
			seen[n] = true
		}
	}
	b.StopTimer()
	defer b.StartTimer()
	for _, gs := range fleetServers(b, f) {
		if gs.Status.State == v1alpha1.GameServerStateAllocated {
			res.AllocatedInAPI++
			if !seen[gs.Name] {
				b.Errorf("server %s is Allocated but no answer named it", gs.Name)
			}
		}
	}
	if res.DoubleAllocs > 0 || res.UnAllocated > 0 || res.AllocatedInAPI != len(seen) {
		b.Fatalf("double allocations %d, UnAllocated %d, %d Allocated in the API server for %d answers",
			res.DoubleAllocs, res.UnAllocated, res.AllocatedInAPI, len(seen))
	}
	res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = quantileMs(lat, 0.5), quantileMs(lat, 0.9), quantileMs(lat, 0.99), quantileMs(lat, 1)
	fmt.Printf("%s: API requests per allocation: %s; API server CPU %.1f ms per allocation\n",
		mode, readAPIRequests(b).per(req0, allocBenchRound), ms(apiServerCPU(b)-api0)/allocBenchRound)
	endMatches(b, f)
	waitFleetAt(b, f, allocBenchServers, 15*time.Minute)
	return res
}

// allocateOnce posts one allocation, with an Idempotency-Key unless key is empty, and returns the
// server's name ("" for UnAllocated).
func allocateOnce(hc *http.Client, token, key string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, allocatorURL, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set(IdempotencyKeyHeader, key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("allocator answered %d: %s", resp.StatusCode, raw)
	}
	var out v1alpha1.GameServerAllocation
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", err
	}
	return out.Status.GameServerName, nil
}

// endMatches ends the process of every Allocated server of the fleet; the fleet replaces them.
func endMatches(b *testing.B, f *v1alpha1.Fleet) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(16)
	for _, gs := range fleetServers(b, f) {
		if gs.Status.State == v1alpha1.GameServerStateAllocated {
			g.Go(func() error {
				return kube.finish(context.Background(), client.ObjectKeyFromObject(gs), corev1.PodSucceeded)
			})
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// netcodeBench is the netcode benchmark's fleet and a watch on its servers.
type netcodeBench struct {
	fleet *v1alpha1.Fleet
	rate  int32

	mu sync.Mutex
	// appliedAt[name][tickRateHz] is when the watch first showed the server running that tick
	// rate (spec.netcode at it, its generation applied); fleetAt[tickRateHz] when it first
	// showed the fleet's ConfigApplied True at it.
	appliedAt map[string]map[int32]time.Time
	fleetAt   map[int32]time.Time
}

// netcodeBenchResult is one edit of BenchmarkFleetNetcode, as written to
// _out/bench/fleet-netcode.json.
type netcodeBenchResult struct {
	Servers   int     `json:"servers"`
	Allocated int     `json:"allocated"`
	P50Ms     float64 `json:"p50Ms"`
	P90Ms     float64 `json:"p90Ms"`
	P99Ms     float64 `json:"p99Ms"`
	AllMs     float64 `json:"allAppliedMs"`
	FleetMs   float64 `json:"fleetConfigAppliedMs"`
}

func newNetcodeBench(b *testing.B) *netcodeBench {
	b.Helper()
	nb := &netcodeBench{rate: 60, appliedAt: map[string]map[int32]time.Time{}, fleetAt: map[int32]time.Time{}}
	nb.fleet = newBenchFleetOf(b, "netcode-bench", netcodeBenchServers)
	for range netcodeBenchAllocated {
		if st := allocateHTTP(b, nb.fleet.Namespace, v1alpha1.GameServerAllocationSpec{Fleet: nb.fleet.Name}); st.State != v1alpha1.AllocationAllocated {
			b.Fatalf("allocation %+v", st)
		}
	}
	// The watch the measurement reads, as `kubectl get -w` would see it.
	startWatch(b, nb.fleet.Namespace, map[client.Object]func(any){
		&v1alpha1.GameServer{}: func(obj any) {
			gs, ok := obj.(*v1alpha1.GameServer)
			if !ok || gs.Status.Netcode.AppliedGeneration != gs.Generation {
				return
			}
			now := time.Now()
			nb.mu.Lock()
			defer nb.mu.Unlock()
			firstSeen(nb.appliedAt, gs.Name, gs.Spec.Netcode.TickRateHz, now)
		},
		&v1alpha1.Fleet{}: func(obj any) {
			f, ok := obj.(*v1alpha1.Fleet)
			if !ok || f.Status.ObservedGeneration != f.Generation || f.Status.ConfigAppliedReplicas != netcodeBenchServers {
				return
			}
			nb.mu.Lock()
			defer nb.mu.Unlock()
			if _, seen := nb.fleetAt[f.Spec.Template.Spec.Netcode.TickRateHz]; !seen {
				nb.fleetAt[f.Spec.Template.Spec.Netcode.TickRateHz] = time.Now()
			}
		},
	})
	return nb
}

// BenchmarkFleetNetcode edits the netcode of a fleet of 200 servers (50 of them Allocated) and
// measures, per server, the time from the edit (the API server accepted it) to a watch showing
// the server running it: fleet reconcile, spec patch, GameServer reconcile, push to the process,
// apply at a tick boundary, status patch, watch delivery. It reports the quantiles, the time
// until every server ran it, and until the fleet's ConfigApplied condition said so.
func BenchmarkFleetNetcode(b *testing.B) {
	if netcodeBenchFleet == nil {
		netcodeBenchFleet = newNetcodeBench(b)
	}
	nb := netcodeBenchFleet
	first := len(netcodeBenchRuns)
	for b.Loop() {
		// A different tick rate each round, so every edit is a real config change.
		nb.rate = 20 + (nb.rate-19)%100
		rate := nb.rate
		patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"netcode":{"tickRateHz":%d}}}}}`, rate)
		f := &v1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Namespace: nb.fleet.Namespace, Name: nb.fleet.Name}}
		req0, api0, etcd0, self0 := readAPIRequests(b), apiServerCPU(b), childCPU(b, "etcd"), childCPU(b, "self")
		profiled := apiServerProfile(b, b.Name())
		if err := k8s.Patch(context.Background(), f, client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatal(err)
		}
		edited := time.Now()
		lat := make([]time.Duration, 0, netcodeBenchServers)
		var fleetAt time.Time
		waitFor(b, 5*time.Minute, "every server to run the edit", func() (bool, error) {
			nb.mu.Lock()
			defer nb.mu.Unlock()
			lat = lat[:0]
			for _, m := range nb.appliedAt {
				if at, ok := m[rate]; ok {
					lat = append(lat, at.Sub(edited))
				}
			}
			fleetAt = nb.fleetAt[rate]
			return len(lat) == netcodeBenchServers && !fleetAt.IsZero(), fmt.Errorf("%d of %d servers applied", len(lat), netcodeBenchServers)
		})
		fmt.Printf("API requests per server: %s; CPU per server: API server %.1f ms, etcd %.1f ms, this process (operator, kubelet, servers, watch) %.1f ms\n",
			readAPIRequests(b).per(req0, netcodeBenchServers), ms(apiServerCPU(b)-api0)/netcodeBenchServers,
			ms(childCPU(b, "etcd")-etcd0)/netcodeBenchServers, ms(childCPU(b, "self")-self0)/netcodeBenchServers)
		profiled()
		netcodeBenchRuns = append(netcodeBenchRuns, netcodeBenchResult{
			Servers: netcodeBenchServers, Allocated: netcodeBenchAllocated,
			P50Ms: quantileMs(lat, 0.5), P90Ms: quantileMs(lat, 0.9), P99Ms: quantileMs(lat, 0.99), AllMs: quantileMs(lat, 1),
			FleetMs: ms(fleetAt.Sub(edited)),
		})
	}
	// The metrics are the means of this run's edits.
	var p50, p99, all, fleet float64
	runs := netcodeBenchRuns[first:]
	for _, r := range runs {
		p50, p99, all, fleet = p50+r.P50Ms, p99+r.P99Ms, all+r.AllMs, fleet+r.FleetMs
	}
	n := float64(len(runs))
	b.ReportMetric(p50/n, "p50-ms")
	b.ReportMetric(p99/n, "p99-ms")
	b.ReportMetric(all/n, "all-ms")
	b.ReportMetric(fleet/n, "fleet-ms")
	fmt.Printf("\n%-8s %9s %8s %8s %8s %8s %9s\n", "servers", "allocated", "p50 ms", "p90 ms", "p99 ms", "all ms", "fleet ms")
	for _, r := range netcodeBenchRuns {
		fmt.Printf("%-8d %9d %8.1f %8.1f %8.1f %8.1f %9.1f\n", r.Servers, r.Allocated, r.P50Ms, r.P90Ms, r.P99Ms, r.AllMs, r.FleetMs)
	}
	writeFleetBench(b, "fleet-netcode.json", netcodeBenchRuns)
}

func counterValue(tb testing.TB, c interface{ Write(*dto.Metric) error }) float64 {
	tb.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// writeFleetBench writes a benchmark's runs as JSON under _out/bench.
func writeFleetBench(b *testing.B, file string, runs any) {
	b.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, "_out", "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	raw, err := json.MarshalIndent(runs, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), append(raw, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
}
