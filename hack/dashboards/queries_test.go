package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/controllers"
	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/podrunner"
	"github.com/netfleet/netfleet/internal/testbin"
	"github.com/netfleet/netfleet/internal/testenv"
)

const (
	testFleet = "arena"
	// rateInterval stands for Grafana's $__rate_interval: long enough to hold the config push
	// the test makes after Prometheus has started, with a 1 s scrape interval.
	rateInterval = "30s"
	// waitLimit bounds every wait; generous for a loaded 2-core machine.
	waitLimit = 60 * time.Second
)

// TestPanelQueriesReturnData runs every panel query of the generated dashboards against a real
// Prometheus (1 s scrape interval) that scrapes a real operator (the controllers on an envtest
// API server, served from controller-runtime's registry as the operator binary serves it) and
// two real game-server processes of a Fleet (cmd/gameserver run as Pods by the local pod
// runner), one of them under load from real ENet bots, the Fleet kept at two by a
// FleetAutoscaler. Targets carry the namespace, pod, gameserver and fleet labels a Kubernetes
// scrape config derives from the Pod. The dashboard variables are substituted as Grafana would;
// every query must return at least one sample that is a number. It also runs promtool check metrics on a real scrape of the operator and of a
// game server, and checks that each variable query lists the test's objects.
func TestPanelQueriesReturnData(t *testing.T) {
	promBin, promtool := lookPath(t, "prometheus"), lookPath(t, "promtool")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	boards := loadBoards(t, filepath.Join(root, "charts", "netfleet", "dashboards"))
	gsBin := buildGameServer(t, root)

	var logs syncBuffer
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(&logs, prefix, args) }, funcr.Options{}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator and pod runner log:\n%s", logs.tail(8000))
		}
	})
	_, cfg := testenv.Start(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("obs-%d", rand.IntN(1e6))
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	operatorAddr := startOperator(ctx, t, cfg, scheme)
	startPodRunner(ctx, t, cfg, gsBin, ns)

	adminPort := int32(40000 + rand.IntN(10000))
	fleet := newFleet(ns, adminPort)
	if err := k8s.Create(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, newAutoscaler(ns)); err != nil {
		t.Fatal(err)
	}
	servers := waitServers(ctx, t, k8s, ns, 2)
	loaded := servers[0]
	for _, s := range servers {
		t.Logf("game server %s: admin %s, game %s", s.name, s.admin, s.game)
	}
	t.Logf("bots on %s", loaded.name)

	prom := startPrometheus(t, promBin, operatorAddr, ns, servers)
	startBots(ctx, t, loaded.game)

	// Several scrapes of the loaded server with its peers, then a netcode edit of the Fleet,
	// pushed to both servers while Prometheus watches.
	prom.waitFor(t, "three scrapes with peers",
		fmt.Sprintf(`count_over_time(netfleet_gameserver_peer_send_rate_hertz{gameserver=%q}[1m]) >= 3`, loaded.name))
	prom.waitFor(t, "the operator's series", `netfleet_operator_fleet_desired_replicas`)
	prom.waitFor(t, "the autoscaler's decision", `netfleet_operator_fleetautoscaler_desired_replicas == 2`)
	editNetcode(ctx, t, k8s, fleet)
	prom.waitFor(t, "config pushes observed", `sum(increase(netfleet_operator_config_push_duration_seconds_count[`+rateInterval+`])) > 0`)
	prom.waitFor(t, "config propagation observed", `sum(increase(netfleet_operator_config_propagation_seconds_count[`+rateInterval+`])) > 0`)
	prom.waitFor(t, "the new generation running", fmt.Sprintf(`netfleet_gameserver_config_generation{gameserver=%q} > 1`, loaded.name))

	checkExposition(t, promtool, "operator", "http://"+operatorAddr+"/metrics")
	checkExposition(t, promtool, "game server", "http://"+loaded.admin+netcode.PathMetrics)

	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.name
	}
	queries := 0
	for _, b := range boards {
		vars := map[string]string{"namespace": ns, "fleet": testFleet, "gameserver": loaded.name}
		if b.multi["gameserver"] {
			vars["gameserver"] = strings.Join(names, "|")
		}
		for _, v := range b.variables {
			want := map[string]string{"namespace": ns, "fleet": testFleet, "gameserver": loaded.name}[v.name]
			got := prom.labelValues(t, substitute(v.query, vars))
			if !contains(got, want) {
				t.Errorf("%s: variable %s (%s) lists %q, want %q among them", b.title, v.name, v.query, got, want)
			}
		}
		for _, p := range b.panels {
			for _, expr := range p.exprs {
				queries++
				q := substitute(expr, vars)
				res, err := prom.query(q)
				switch {
				case err != nil:
					t.Errorf("%s / %s: %s: %v", b.title, p.title, q, err)
				case len(res) == 0:
					t.Errorf("%s / %s: no data for %s", b.title, p.title, q)
				case !anyNumber(res):
					t.Errorf("%s / %s: only NaN for %s", b.title, p.title, q)
				}
			}
		}
	}
	t.Logf("%d panel queries of %d dashboards returned data", queries, len(boards))
}

// boardQueries is what the test reads of a dashboard's JSON.
type boardQueries struct {
	title     string
	variables []variable
	multi     map[string]bool
	panels    []panelQueries
}

type variable struct{ name, query string }

type panelQueries struct {
	title string
	exprs []string
}

func loadBoards(t *testing.T, dir string) []boardQueries {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dir, err)
	}
	var out []boardQueries
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Title      string `json:"title"`
			Templating struct {
				List []struct {
					Type  string `json:"type"`
					Name  string `json:"name"`
					Query any    `json:"query"`
					Multi bool   `json:"multi"`
				} `json:"list"`
			} `json:"templating"`
			Panels []struct {
				Type    string `json:"type"`
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b := boardQueries{title: d.Title, multi: map[string]bool{}}
		for _, v := range d.Templating.List {
			b.multi[v.Name] = v.Multi
			if q, ok := v.Query.(string); ok && v.Type == "query" {
				b.variables = append(b.variables, variable{name: v.Name, query: q})
			}
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			pq := panelQueries{title: p.Title}
			for _, tg := range p.Targets {
				pq.exprs = append(pq.exprs, tg.Expr)
			}
			if len(pq.exprs) == 0 {
				t.Errorf("%s / %s: a panel without a query", d.Title, p.Title)
			}
			b.panels = append(b.panels, pq)
		}
		out = append(out, b)
	}
	return out
}

// substitute replaces the dashboard variables as Grafana does before it sends a query.
func substitute(expr string, vars map[string]string) string {
	expr = strings.ReplaceAll(expr, "$__rate_interval", rateInterval)
	for name, v := range vars {
		expr = strings.ReplaceAll(expr, "$"+name, v)
	}
	return expr
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s (Debian package prometheus, make deps): %v", name, err)
	}
	return p
}

func buildGameServer(t *testing.T, root string) string {
	t.Helper()
	bins, err := testbin.Build(root, t.TempDir(), nil, "./cmd/gameserver")
	if err != nil {
		t.Fatalf("build cmd/gameserver: %v", err)
	}
	return bins["./cmd/gameserver"]
}

// startOperator runs the operator's controllers and its state collector in a manager, and
// serves controller-runtime's registry — what the operator binary's /metrics serves — on a
// loopback port, whose address it returns.
func startOperator(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme) string {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   controllers.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.NewGameServerReconciler(mgr, controllers.GameServerOptions{
		PortRange: controllers.PortRange{Min: 27000, Max: 27999}, RetryBase: 50 * time.Millisecond, RetryMax: time.Second,
	}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := controllers.NewFleetReconciler(mgr, controllers.FleetOptions{}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := controllers.NewFleetAutoscalerReconciler(mgr, controllers.FleetAutoscalerOptions{}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	state := controllers.NewStateCollector(mgr.GetClient())
	if err := ctrlmetrics.Registry.Register(state); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrlmetrics.Registry.Unregister(state) })

	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// startPodRunner runs the namespace's Pods as local processes, each on a loopback address of
// its own, from a random first address so that concurrent runs do not meet.
func startPodRunner(ctx context.Context, t *testing.T, cfg *rest.Config, gsBin, ns string) {
	t.Helper()
	first := netip.AddrFrom4([4]byte{127, byte(100 + rand.IntN(100)), byte(rand.IntN(250)), 2})
	r, err := podrunner.New(cfg, podrunner.Options{
		Images:       map[string]string{"netfleet/gameserver": gsBin},
		Dir:          filepath.Join(t.TempDir(), "pods"),
		Namespace:    ns,
		FirstAddress: first,
		NodePrefix:   "obs-" + ns,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Start(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("pod runner: %v", err)
		}
	})
	select {
	case <-r.Started():
	case err := <-done:
		t.Fatalf("pod runner: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("pod runner did not start")
	}
}

// newFleet is a Fleet of two small game servers.
func newFleet(ns string, adminPort int32) *v1alpha1.Fleet {
	return &v1alpha1.Fleet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testFleet},
		Spec: v1alpha1.FleetSpec{
			Replicas: 2,
			Template: v1alpha1.GameServerTemplateSpec{Spec: v1alpha1.GameServerSpec{
				Ports:     []v1alpha1.GameServerPort{{Name: "game", ContainerPort: netcode.DefaultGamePort, Protocol: corev1.ProtocolUDP, PortPolicy: v1alpha1.PortPolicyDynamic}},
				AdminPort: adminPort,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "server",
					Image: "netfleet/gameserver:test",
					Args:  []string{"--world-population=200", "--world-half-extent=400", "--max-peers=32"},
				}}}},
			}},
		},
	}
}

// newAutoscaler keeps the Fleet at its two servers: a buffer of 2 within [2, 2].
func newAutoscaler(ns string) *v1alpha1.FleetAutoscaler {
	return &v1alpha1.FleetAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testFleet},
		Spec: v1alpha1.FleetAutoscalerSpec{
			FleetName: testFleet,
			Policy: v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyBuffer, Buffer: &v1alpha1.BufferPolicy{
				BufferSize: intstr.FromInt32(2), MinReplicas: 2, MaxReplicas: 2,
			}},
		},
	}
}

// server is one running game server of the Fleet.
type server struct {
	name  string
	admin string         // podIP:adminPort
	game  netip.AddrPort // where players connect
}

// waitServers waits for n Ready GameServers of the Fleet and returns them.
func waitServers(ctx context.Context, t *testing.T, k client.Client, ns string, n int) []server {
	t.Helper()
	var out []server
	waitFor(t, "Ready game servers", func() (bool, error) {
		out = out[:0]
		var list v1alpha1.GameServerList
		if err := k.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelFleet: testFleet}); err != nil {
			return false, err
		}
		for _, gs := range list.Items {
			if gs.Status.State != v1alpha1.GameServerStateReady {
				return false, fmt.Errorf("%s is %q", gs.Name, gs.Status.State)
			}
			var pod corev1.Pod
			if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: gs.Name}, &pod); err != nil {
				return false, err
			}
			game, err := netip.ParseAddrPort(net.JoinHostPort(gs.Status.Address, strconv.Itoa(int(gs.Status.Port))))
			if err != nil {
				return false, err
			}
			admin := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(gs.Spec.AdminPort)))
			out = append(out, server{name: gs.Name, admin: admin, game: game})
		}
		return len(out) == n, fmt.Errorf("%d of %d servers", len(out), n)
	})
	return out
}

// editNetcode changes the Fleet's netcode: the operator patches its servers and pushes the new
// config to both.
func editNetcode(ctx context.Context, t *testing.T, k client.Client, f *v1alpha1.Fleet) {
	t.Helper()
	base := f.DeepCopy()
	f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 12
	if err := k.Patch(ctx, f, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// startBots connects eight ENet bots to addr until the test ends.
func startBots(ctx context.Context, t *testing.T, addr netip.AddrPort) {
	t.Helper()
	swarm, err := botswarm.New(botswarm.Config{
		Server:   addr,
		Classes:  []botswarm.Class{{Name: "bots", Count: 8}},
		Duration: 3 * time.Minute,
		Ramp:     500 * time.Millisecond,
		Seed:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	bctx, stop := context.WithCancel(ctx)
	if err := swarm.Start(bctx); err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		swarm.Wait()
	})
}

// promServer is a Prometheus started for the test.
type promServer struct{ base string }

// startPrometheus runs Prometheus with a 1 s scrape interval on the operator and the game
// servers, each game server's target labeled as the chart's scrape config labels it.
func startPrometheus(t *testing.T, bin, operatorAddr, ns string, servers []server) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: netfleet-operator
    honor_labels: true
    static_configs:
      - targets: [%q]
  - job_name: netfleet-gameserver
    static_configs:
`, operatorAddr)
	for _, s := range servers {
		fmt.Fprintf(&cfg, `      - targets: [%q]
        labels: {namespace: %q, pod: %q, gameserver: %q, fleet: %q}
`, s.admin, ns, s.name, s.name, testFleet)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-exited; err == nil {
			t.Log("prometheus exited before it was killed")
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.tail(4000))
		}
	})
	p := &promServer{base: "http://" + addr}
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, out.tail(4000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready: %v", err)
		}
	}
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query and returns the vector.
func (p *promServer) query(q string) ([]sample, error) {
	resp, err := http.Get(p.base + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query failed: %s", body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", body.Data.ResultType)
	}
	return body.Data.Result, nil
}

// waitFor waits until q returns a sample.
func (p *promServer) waitFor(t *testing.T, what, q string) {
	t.Helper()
	waitFor(t, what, func() (bool, error) {
		res, err := p.query(q)
		return err == nil && len(res) > 0, err
	})
}

// labelValuesQuery is Grafana's label_values(selector, label) variable query.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+), *([a-z_]+)\)$`)

// labelValues runs a label_values variable query the way Grafana resolves it.
func (p *promServer) labelValues(t *testing.T, q string) []string {
	t.Helper()
	m := labelValuesQuery.FindStringSubmatch(q)
	if m == nil {
		t.Fatalf("not a label_values query: %s", q)
	}
	res, err := p.query(fmt.Sprintf("group by (%s) (%s)", m[2], m[1]))
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out []string
	for _, s := range res {
		out = append(out, s.Metric[m[2]])
	}
	return out
}

func anyNumber(res []sample) bool {
	for _, s := range res {
		str, ok := s.Value[1].(string)
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(v) {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// checkExposition scrapes url and runs promtool check metrics on what it serves.
func checkExposition(t *testing.T, promtool, what, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", what, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %v, status %d", what, err, resp.StatusCode)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics on the %s's exposition: %v\n%s", what, err, out)
		return
	}
	t.Logf("promtool check metrics: the %s's exposition (%d bytes) passes", what, len(raw))
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last: %v)", waitLimit, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// tail returns the last n bytes written.
func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
