// Command operator runs netfleet's controllers: it keeps every GameServer's Pod and pushes each
// server's netcode config into the running process, keeps every Fleet's GameServers, sets the
// replicas of autoscaled Fleets, serves GameServerAllocation resources, and answers allocations synchronously on its allocator
// endpoint. It builds with CGO_ENABLED=0 and imports nothing from gameserver/.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/controllers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr, probeAddr, portRange, leaderNamespace string
		leaderElect                                        bool
		opts                                               controllers.GameServerOptions
		fleetOpts                                          controllers.FleetOptions
		autoscalerOpts                                     controllers.FleetAutoscalerOptions
		allocOpts                                          controllers.AllocatorServerOptions
		allocSecret                                        string
		allocConcurrency                                   int
		idempotencyTTL                                     time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address the /metrics endpoint binds to; 0 disables it")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader (lease netfleet-operator) so that only one replica reconciles")
	flag.StringVar(&leaderNamespace, "leader-election-namespace", "", "namespace of the leader lease; default: the operator's own namespace")
	flag.StringVar(&portRange, "port-range", "7000-8000", "host ports for Dynamic game ports, min-max")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 32, "GameServers reconciled (and pushed to) at once")
	flag.DurationVar(&opts.VerifyInterval, "verify-interval", 10*time.Second, "how often a running server's config is checked")
	flag.DurationVar(&opts.PushTimeout, "push-timeout", 5*time.Second, "bound of one call to a game server's admin API")
	flag.IntVar(&fleetOpts.MaxConcurrentReconciles, "max-concurrent-fleet-reconciles", 4, "Fleets reconciled at once")
	flag.IntVar(&autoscalerOpts.MaxConcurrentReconciles, "max-concurrent-autoscaler-reconciles", 4, "FleetAutoscalers reconciled at once")
	flag.DurationVar(&autoscalerOpts.WebhookRetryMax, "autoscaler-webhook-retry-max", time.Minute,
		"longest back-off between calls of a FleetAutoscaler webhook that keeps failing (the first retry waits 1s, doubling)")
	flag.IntVar(&allocConcurrency, "max-concurrent-allocations", 16, "GameServerAllocation resources served at once")
	flag.StringVar(&allocOpts.Addr, "allocator-bind-address", ":8090", "address of the allocator endpoint (POST "+controllers.AllocatePath+"); 0 disables it")
	flag.StringVar(&allocSecret, "allocator-token-secret", "netfleet-system/netfleet-allocator-token",
		"namespace/name of the Secret whose key \"token\" holds the allocator endpoint's bearer token; created with a random token when missing")
	flag.StringVar(&allocOpts.CertFile, "allocator-tls-cert-file", "", "serve the allocator endpoint over HTTPS with this certificate (with --allocator-tls-key-file)")
	flag.StringVar(&allocOpts.KeyFile, "allocator-tls-key-file", "", "private key of --allocator-tls-cert-file")
	flag.DurationVar(&idempotencyTTL, "allocation-idempotency-ttl", controllers.DefaultIdempotencyTTL,
		"how long the record of an allocator request sent with an Idempotency-Key is kept: the same key within it gets the first answer")
	var keyOpts controllers.ConnectKeyOptions
	flag.DurationVar(&keyOpts.RotationPeriod, "connect-key-rotation", 720*time.Hour,
		"how long a fleet's connect-token key signs before the operator rotates it (docs/connect-tokens.md)")
	flag.DurationVar(&keyOpts.Propagation, "connect-key-propagation", time.Minute,
		"how long a new connect-token key waits before it signs, so every server of the fleet has it first; keep it above --verify-interval")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	rng, err := controllers.ParsePortRange(portRange)
	if err != nil {
		return fmt.Errorf("--port-range: %w", err)
	}
	opts.PortRange = rng
	if allocOpts.Addr != "0" {
		ns, name, ok := strings.Cut(allocSecret, "/")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("--allocator-token-secret %q: want namespace/name", allocSecret)
		}
		allocOpts.TokenSecret = types.NamespacedName{Namespace: ns, Name: name}
		if (allocOpts.CertFile == "") != (allocOpts.KeyFile == "") {
			return fmt.Errorf("--allocator-tls-cert-file and --allocator-tls-key-file go together")
		}
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         controllers.CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        probeAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              "netfleet-operator",
		LeaderElectionNamespace:       leaderNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("new manager: %w", err)
	}
	// One store of connect-token keys serves the servers' pushes and the allocations' tokens.
	keys := controllers.NewConnectKeyStore(mgr.GetAPIReader(), mgr.GetClient(), keyOpts)
	opts.ConnectKeys = keys
	gsReconciler := controllers.NewGameServerReconciler(mgr, opts)
	if err := gsReconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up gameserver controller: %w", err)
	}
	if err := controllers.NewFleetReconciler(mgr, fleetOpts).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up fleet controller: %w", err)
	}
	if err := controllers.NewFleetAutoscalerReconciler(mgr, autoscalerOpts).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up fleetautoscaler controller: %w", err)
	}
	// One allocator serves both the resource and the endpoint, so their requests share claims.
	alloc, err := controllers.NewAllocator(ctx, mgr.GetCache(), mgr.GetAPIReader(), mgr.GetClient())
	if err != nil {
		return fmt.Errorf("set up allocator: %w", err)
	}
	alloc.SetConnectKeys(keys)
	// Allocations reach the game through the admin API before their result is handed out.
	alloc.DeliverWith(gsReconciler)
	if err := controllers.NewAllocationReconciler(mgr, alloc, allocConcurrency).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up allocation controller: %w", err)
	}
	if err := controllers.NewIdempotencyRecordReconciler(mgr, idempotencyTTL).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up allocation record controller: %w", err)
	}
	if allocOpts.Addr != "0" {
		if err := mgr.Add(controllers.NewAllocatorServer(alloc, mgr.GetAPIReader(), mgr.GetClient(), allocOpts)); err != nil {
			return fmt.Errorf("add allocator endpoint: %w", err)
		}
	}
	if err := ctrlmetrics.Registry.Register(controllers.NewStateCollector(mgr.GetClient())); err != nil {
		return fmt.Errorf("register state metrics: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readyz check: %w", err)
	}
	ctrl.Log.WithName("setup").Info("starting operator", "portRange", rng.String(),
		"maxConcurrentReconciles", opts.MaxConcurrentReconciles, "leaderElect", leaderElect,
		"allocatorAddress", allocOpts.Addr)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
