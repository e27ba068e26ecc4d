package controllers

import (
	"context"
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The suite's operator also runs the Fleet, FleetAutoscaler and GameServerAllocation controllers
// and the allocator endpoint, on a loopback port with its token Secret in allocatorTokenSecret.
var (
	allocator    *Allocator
	allocatorURL string
)

// testIdempotencyTTL is how long the suite's operator keeps the records of keyed allocations:
// long enough for a test's retries, short enough to see one expire.
const testIdempotencyTTL = 8 * time.Second

// The suite's autoscaler backs off a failing webhook from 200 ms to 1.6 s, so a test sees several
// retries in a few seconds.
const (
	testWebhookRetryBase = 200 * time.Millisecond
	testWebhookRetryMax  = 1600 * time.Millisecond
)

var allocatorTokenSecret = types.NamespacedName{Namespace: "netfleet-system", Name: "netfleet-allocator-token"}

// setupFleetControllers adds the Fleet and allocation controllers and the allocator endpoint to
// the suite's manager. The token Secret's namespace, the operator's own, exists already
// (operatorConfig).
func setupFleetControllers(ctx context.Context, mgr ctrl.Manager) error {
	if err := NewFleetReconciler(mgr, FleetOptions{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setup fleet: %w", err)
	}
	autoscaler := NewFleetAutoscalerReconciler(mgr, FleetAutoscalerOptions{WebhookRetryBase: testWebhookRetryBase, WebhookRetryMax: testWebhookRetryMax})
	if err := autoscaler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setup fleetautoscaler: %w", err)
	}
	var err error
	allocator, err = NewAllocator(ctx, mgr.GetCache(), mgr.GetAPIReader(), mgr.GetClient())
	if err != nil {
		return fmt.Errorf("allocator: %w", err)
	}
	allocator.DeliverWith(operator)
	if err := NewAllocationReconciler(mgr, allocator, 0).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setup allocation: %w", err)
	}
	if err := NewIdempotencyRecordReconciler(mgr, testIdempotencyTTL).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setup allocation records: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("allocator listener: %w", err)
	}
	allocatorURL = "http://" + ln.Addr().String() + AllocatePath
	srv := NewAllocatorServer(allocator, mgr.GetAPIReader(), mgr.GetClient(), AllocatorServerOptions{TokenSecret: allocatorTokenSecret})
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return srv.Serve(ctx, ln) })); err != nil {
		return fmt.Errorf("add allocator endpoint: %w", err)
	}
	return nil
}
