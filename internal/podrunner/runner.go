package podrunner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Runner runs Pods as local processes; see the package doc. It implements controller-runtime's
// manager.Runnable.
type Runner struct {
	opts    Options
	client  client.Client // reads and writes straight to the API server
	pods    cache.Cache   // watches Pods only
	pool    *addressPool
	started chan struct{}

	mu       sync.Mutex
	ctx      context.Context
	log      logr.Logger
	workers  map[types.UID]*worker
	deleting map[types.UID]bool // Pods whose worker deleted them, until the watch sees them go
	stopping bool
	wg       sync.WaitGroup
}

// New returns a Runner talking to the API server of cfg. It validates opts (see
// Options.Validate) and creates opts.Dir.
func New(cfg *rest.Config, opts Options) (*Runner, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("podrunner: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("podrunner: scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("podrunner: client: %w", err)
	}
	cacheOpts := cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()}
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	pods, err := cache.New(cfg, cacheOpts)
	if err != nil {
		return nil, fmt.Errorf("podrunner: cache: %w", err)
	}
	return &Runner{
		opts:     opts,
		client:   c,
		pods:     pods,
		pool:     newAddressPool(opts.FirstAddress),
		started:  make(chan struct{}),
		workers:  map[types.UID]*worker{},
		deleting: map[types.UID]bool{},
	}, nil
}

// Started is closed once the runner watches Pods.
func (r *Runner) Started() <-chan struct{} { return r.started }

// Dir is the directory of the Pods' log files.
func (r *Runner) Dir() string { return r.opts.Dir }

// Start runs Pods until ctx ends, then stops every process it started (SIGTERM, then SIGKILL
// after the capped grace period) and returns once all are gone. The Pods' objects are left as
// they are, as when a kubelet stops.
func (r *Runner) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("podrunner")
	ctx, cancel := context.WithCancel(log.IntoContext(ctx, logger))
	defer cancel()

	cacheDone := make(chan error, 1)
	go func() { cacheDone <- r.pods.Start(ctx) }()
	abort := func(err error) error {
		cancel()
		return errors.Join(err, <-cacheDone)
	}
	inf, err := r.pods.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return abort(fmt.Errorf("podrunner: pod informer: %w", err))
	}
	r.mu.Lock()
	r.ctx, r.log = ctx, logger
	r.mu.Unlock()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    r.onPod,
		UpdateFunc: func(_, obj any) { r.onPod(obj) },
		DeleteFunc: r.onPodDeleted,
	}); err != nil {
		return abort(fmt.Errorf("podrunner: pod handler: %w", err))
	}
	if !r.pods.WaitForCacheSync(ctx) {
		return abort(fmt.Errorf("podrunner: pod watch did not sync: %w", ctx.Err()))
	}
	close(r.started)
	logger.Info("watching pods", "images", r.opts.Images, "dir", r.opts.Dir, "namespace", r.opts.Namespace)

	var cacheErr error
	select {
	case <-ctx.Done():
		cacheErr = <-cacheDone
	case cacheErr = <-cacheDone:
		// The watch ended by itself: stop the Pods too.
	}
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	cancel()
	r.wg.Wait()
	if cacheErr != nil {
		return fmt.Errorf("podrunner: pod watch: %w", cacheErr)
	}
	return nil
}

// onPod hands a Pod to its worker, starting one for a Pod the runner is responsible for.
func (r *Runner) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.workers[pod.UID]; w != nil {
		w.notify(pod)
		return
	}
	if r.stopping || r.deleting[pod.UID] {
		return
	}
	addr, ok := r.placement(pod)
	if !ok {
		return
	}
	w := newWorker(r, pod.DeepCopy(), addr)
	r.workers[pod.UID] = w
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		deleted := w.run(r.ctx)
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.workers, w.uid)
		if deleted {
			r.deleting[w.uid] = true
		}
		r.pool.release(w.addr)
	}()
}

// placement decides whether the runner is responsible for pod and returns its address: a new
// one for an unscheduled Pod, its node's for a Pod bound to one of the runner's nodes (e.g. by
// a runner before this one). The caller holds r.mu.
func (r *Runner) placement(pod *corev1.Pod) (netip.Addr, bool) {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if _, ok := r.opts.binaryFor(cs[i].Image); !ok {
				return netip.Addr{}, false
			}
		}
	}
	if pod.Spec.NodeName != "" {
		addr, ours := nodeAddress(r.opts.NodePrefix, pod.Spec.NodeName)
		if !ours {
			return netip.Addr{}, false
		}
		if !r.pool.claim(addr) {
			r.log.Error(nil, "address of the pod's node is in use by another pod", "pod", client.ObjectKeyFromObject(pod), "node", pod.Spec.NodeName)
			return netip.Addr{}, false
		}
		return addr, true
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		(pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName) {
		return netip.Addr{}, false
	}
	addr, err := r.pool.take()
	if err != nil {
		r.log.Error(err, "cannot place pod", "pod", client.ObjectKeyFromObject(pod))
		return netip.Addr{}, false
	}
	return addr, true
}

func (r *Runner) onPodDeleted(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.deleting, pod.UID)
	if w := r.workers[pod.UID]; w != nil {
		w.notifyGone()
	}
}
