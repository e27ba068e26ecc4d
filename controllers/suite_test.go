package controllers

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/testenv"
)

// The package shares one API server, one operator and one fake kubelet; every test works in its
// own namespace. The operator runs as its ServiceAccount with config/rbac's rules
// (rbac_suite_test.go); the tests and the fake kubelet act as an admin.
var (
	testScheme  = runtime.NewScheme()
	restCfg     *rest.Config
	k8s         client.Client // reads straight from the API server
	kube        *kubelet
	operator    *GameServerReconciler
	operatorLog syncBuffer
	// suiteCtx ends before the API server stops; watches the tests open use it.
	suiteCtx context.Context
)

const (
	testNode = "node-a"
	// testNodeIP is the node's InternalIP.
	testNodeIP = "10.20.30.40"
	// testNodeExternalIP is the test node's ExternalIP, which players are given.
	testNodeExternalIP = "203.0.113.7"
	// testAdminPort is the admin port of every test server, each on its own loopback address.
	testAdminPort = 39517
	// testVerifyInterval is the operator's check interval in the tests (the default).
	testVerifyInterval = 10 * time.Second
)

var testPortRange = PortRange{Min: 20000, Max: 29999}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// The operator logs verbosely into a buffer that TestSecretNeverLeaks reads. The logger is set
	// before anything logs: a first log line on a slow start would otherwise discard all logging.
	ctrl.SetLogger(zap.New(zap.WriteTo(&operatorLog), zap.UseDevMode(true), zap.Level(zapcore.Level(-2))))
	utilruntime.Must(clientgoscheme.AddToScheme(testScheme))
	utilruntime.Must(v1alpha1.AddToScheme(testScheme))
	// A fuzz worker runs only the fuzz function (pure code): it needs no API server of its own.
	flag.Parse()
	if w := flag.Lookup("test.fuzzworker"); w != nil && w.Value.String() == "true" {
		return m.Run()
	}
	env, err := testenv.Environment(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		// A start that failed late (e.g. on a CRD) leaves etcd and the API server running.
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
	}()
	// No client-side rate limit: the API server's own fairness is what a real cluster has.
	cfg.QPS, cfg.Burst = -1, 0
	restCfg = cfg

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	suiteCtx = ctx
	stop, err := startOperator(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	code := m.Run()
	if err := kube.errors(); err != nil {
		fmt.Fprintln(os.Stderr, "fake kubelet:", err)
		code = 1
	}
	return code
}

// startOperator starts the operator's manager, the node and the fake kubelet.
func startOperator(ctx context.Context) (func(), error) {
	var err error
	k8s, err = client.New(restCfg, client.Options{Scheme: testScheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	opCfg, err := operatorConfig(ctx, k8s)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(opCfg, ctrl.Options{
		Scheme:                        testScheme,
		Cache:                         CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                true,
		LeaderElectionID:              "netfleet-operator",
		LeaderElectionNamespace:       "netfleet-system",
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	operator = NewGameServerReconciler(mgr, GameServerOptions{
		PortRange: testPortRange, VerifyInterval: testVerifyInterval,
		RetryBase: 50 * time.Millisecond, RetryMax: time.Second,
	})
	if err := operator.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if err := setupFleetControllers(ctx, mgr); err != nil {
		return nil, err
	}
	if err := createNode(ctx); err != nil {
		return nil, err
	}

	// The kubelet watches through its own cache, as the real one does.
	podCache, err := cache.New(restCfg, cache.Options{Scheme: testScheme, ByObject: CacheOptions().ByObject})
	if err != nil {
		return nil, fmt.Errorf("kubelet cache: %w", err)
	}
	kube = newKubelet(k8s, testNode)
	if err := kube.start(ctx, podCache); err != nil {
		return nil, err
	}

	var wg sync.WaitGroup
	mctx, cancel := context.WithCancel(ctx)
	wg.Go(func() {
		if err := mgr.Start(mctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	})
	wg.Go(func() {
		if err := podCache.Start(mctx); err != nil {
			fmt.Fprintln(os.Stderr, "kubelet cache:", err)
		}
	})
	if !podCache.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("kubelet cache did not sync")
	}
	return func() { cancel(); wg.Wait() }, nil
}

func createNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	if err := k8s.Create(ctx, node); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: testNode},
		{Type: corev1.NodeExternalIP, Address: testNodeExternalIP},
		{Type: corev1.NodeInternalIP, Address: testNodeIP},
	}
	if err := k8s.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("set node addresses: %w", err)
	}
	return nil
}

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newGameServer is a valid GameServer with one UDP game port of the given policy.
func newGameServer(ns, name string, policy v1alpha1.PortPolicy, hostPort int32) *v1alpha1.GameServer {
	return &v1alpha1.GameServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.GameServerSpec{
			Ports:     []v1alpha1.GameServerPort{{Name: "game", ContainerPort: netcode.DefaultGamePort, PortPolicy: policy, HostPort: hostPort}},
			AdminPort: testAdminPort,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "server", Image: "netfleet/gameserver:test"}},
			}},
		},
	}
}

// waitFor polls cond every 25ms until it holds or the deadline passes. The deadlines are
// generous: the machine may be loaded.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// getGS reads a GameServer straight from the API server.
func getGS(t testing.TB, gs *v1alpha1.GameServer) *v1alpha1.GameServer {
	t.Helper()
	out := &v1alpha1.GameServer{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(gs), out); err != nil {
		t.Fatal(err)
	}
	return out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.b.String(), sub)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
