package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// GameServerOptions tunes the GameServer reconciler. Zero fields take the defaults below.
type GameServerOptions struct {
	// PortRange holds the host ports of Dynamic game ports. Default 7000-8000.
	PortRange PortRange
	// VerifyInterval is how often the reconciler checks that a running server's process still
	// runs the desired config (it catches a restart the Pod status did not show). Default 10s.
	VerifyInterval time.Duration
	// PushTimeout bounds one call to a server's admin API. Default 5s.
	PushTimeout time.Duration
	// RetryBase and RetryMax bound the jittered exponential backoff of failed pushes.
	// Defaults 100ms and 10s.
	RetryBase, RetryMax time.Duration
	// MaxConcurrentReconciles is how many GameServers are reconciled (and pushed to) at once.
	// Default 32.
	MaxConcurrentReconciles int
	// ConnectKeys is where the fleets' connect-token keys are kept; share it with the Allocator
	// (Allocator.SetConnectKeys). nil makes a store with the default options.
	ConnectKeys *ConnectKeyStore
}

func (o *GameServerOptions) setDefaults() {
	if o.PortRange == (PortRange{}) {
		o.PortRange = PortRange{Min: 7000, Max: 8000}
	}
	if o.VerifyInterval <= 0 {
		o.VerifyInterval = 10 * time.Second
	}
	if o.PushTimeout <= 0 {
		o.PushTimeout = 5 * time.Second
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 100 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 10 * time.Second
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 32
	}
}

// GameServerReconciler creates each GameServer's Pod, tracks its state and address, and keeps
// the running process on spec.netcode through the admin API.
type GameServerReconciler struct {
	client.Client
	recorder events.EventRecorder
	pusher   *Pusher
	tokens   *tokenStore
	keys     *ConnectKeyStore
	ports    *hostPortPicker
	memos    *memos
	watches  *lifecycleWatches
	opts     GameServerOptions
}

// NewGameServerReconciler returns a reconciler that uses mgr's client, cache and event recorder.
func NewGameServerReconciler(mgr ctrl.Manager, opts GameServerOptions) *GameServerReconciler {
	opts.setDefaults()
	if opts.ConnectKeys == nil {
		opts.ConnectKeys = NewConnectKeyStore(mgr.GetAPIReader(), mgr.GetClient(), ConnectKeyOptions{})
	}
	pusher := NewPusher(opts.PushTimeout)
	tokens := newTokenStore(mgr.GetAPIReader(), mgr.GetClient())
	return &GameServerReconciler{
		Client:   mgr.GetClient(),
		recorder: mgr.GetEventRecorder("netfleet-operator"),
		pusher:   pusher,
		tokens:   tokens,
		keys:     opts.ConnectKeys,
		ports:    newHostPortPicker(opts.PortRange),
		memos:    newMemos(),
		watches:  newLifecycleWatches(pusher, tokens, opts.RetryMax/2),
		opts:     opts,
	}
}

// CacheOptions restricts the manager's cache to what the reconciler reads: of all Pods, only
// game-server Pods.
func CacheOptions() cache.Options {
	req, err := labels.NewRequirement(v1alpha1.LabelGameServer, selection.Exists, nil)
	if err != nil {
		// The requirement is a constant and valid; this cannot fail.
		panic(err)
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.NewSelector().Add(*req)},
	}}
}

// SetupWithManager registers the reconciler; Pod changes (phase, readiness, restarts) and
// lifecycle changes the processes report reconcile their GameServer.
func (r *GameServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// The lifecycle watches end with the manager.
	err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.watches.stopAll()
		return nil
	}))
	if err != nil {
		return fmt.Errorf("add lifecycle watches: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.GameServer{}).
		Owns(&corev1.Pod{}).
		WatchesRawSource(source.Channel(r.watches.events, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles}).
		Named("gameserver").
		Complete(r)
}

// +kubebuilder:rbac:groups=netfleet.io,resources=gameservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=netfleet.io,resources=gameservers/status,verbs=get;patch
// +kubebuilder:rbac:groups=netfleet.io,resources=gameservers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=netfleet-admin-token,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one GameServer one step closer to its spec and records what it saw.
func (r *GameServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	gs := &v1alpha1.GameServer{}
	if err := r.Get(ctx, req.NamespacedName, gs); err != nil {
		if apierrors.IsNotFound(err) {
			r.memos.forget(req.NamespacedName)
			r.watches.stop(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get gameserver: %w", err)
	}
	if !gs.DeletionTimestamp.IsZero() {
		// The Pod goes with its owner reference; only the in-memory notes are left to drop.
		r.memos.forget(req.NamespacedName)
		r.watches.stop(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	base := gs.DeepCopy()
	memo := r.memos.get(req.NamespacedName, gs.UID)

	var requeue time.Duration
	pod, err := r.reconcilePod(ctx, gs)
	if err == nil {
		err = r.reconcileAddress(ctx, gs, pod)
		if err == nil {
			requeue, err = r.reconcileConfig(ctx, gs, pod, memo)
		}
	}
	view := r.watchLifecycle(ctx, gs, pod)
	// The state machine needs a true view of the Pod: not after a failed read of it.
	if err == nil || errors.Is(err, reconcile.TerminalError(nil)) || pod != nil {
		requeue = shortest(requeue, r.reconcileState(gs, pod, view))
	}
	if err == nil {
		gs.Status.ObservedGeneration = gs.Generation
	}

	if perr := r.patchStatus(ctx, base, gs); perr != nil {
		if apierrors.IsConflict(perr) && err == nil {
			// Someone else (allocation) changed the state or the held room meanwhile: look again.
			return ctrl.Result{RequeueAfter: r.opts.RetryBase}, nil
		}
		return ctrl.Result{}, errors.Join(err, fmt.Errorf("patch gameserver status: %w", perr))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// reconcilePod returns the GameServer's Pod, creating it while the server is Creating. It returns
// a nil Pod when there is none.
func (r *GameServerReconciler) reconcilePod(ctx context.Context, gs *v1alpha1.GameServer) (*corev1.Pod, error) {
	if gs.Status.State.IsFinal() {
		pod := &corev1.Pod{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(gs), pod); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return pod, nil
	}
	pod := &corev1.Pod{}
	err := r.Get(ctx, client.ObjectKeyFromObject(gs), pod)
	switch {
	case err == nil && !metav1.IsControlledBy(pod, gs):
		return nil, r.fail(gs, "PodConflict", fmt.Errorf("pod %s exists and is not this GameServer's", pod.Name))
	case err == nil:
		return pod, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get pod: %w", err)
	case gs.Status.State != "" && gs.Status.State != v1alpha1.GameServerStateCreating:
		// The Pod is gone after it ran; the state machine records that.
		return nil, nil
	}
	return r.createPod(ctx, gs)
}

func (r *GameServerReconciler) createPod(ctx context.Context, gs *v1alpha1.GameServer) (*corev1.Pod, error) {
	hostPorts, err := r.hostPorts(ctx, gs)
	if err != nil {
		return nil, err
	}
	pod, err := buildPod(gs, hostPorts)
	if err != nil {
		return nil, r.fail(gs, "InvalidSpec", err)
	}
	if err := controllerutil.SetControllerReference(gs, pod, r.Scheme()); err != nil {
		return nil, fmt.Errorf("set owner of pod: %w", err)
	}
	// The Secret must exist before the kubelet starts the container that references it.
	if _, err := r.tokens.get(ctx, gs.Namespace); err != nil {
		return nil, err
	}
	switch err := r.Create(ctx, pod); {
	case apierrors.IsAlreadyExists(err):
		// Created by an earlier pass the cache does not show yet; its event will come.
		return nil, nil
	case apierrors.IsInvalid(err):
		return nil, r.fail(gs, "InvalidPod", fmt.Errorf("create pod: %w", err))
	case err != nil:
		return nil, fmt.Errorf("create pod: %w", err)
	}
	r.recorder.Eventf(gs, pod, corev1.EventTypeNormal, "PodCreated", "CreatePod", "created pod %s", pod.Name)
	return pod, nil
}

// hostPorts returns the host port of every Static and Dynamic port, picking the Dynamic ones.
func (r *GameServerReconciler) hostPorts(ctx context.Context, gs *v1alpha1.GameServer) (map[string]int32, error) {
	out := map[string]int32{}
	dynamic := 0
	for _, p := range gs.Spec.Ports {
		switch p.PortPolicy {
		case v1alpha1.PortPolicyStatic:
			out[p.Name] = p.HostPort
		case v1alpha1.PortPolicyNone:
		default:
			dynamic++
		}
	}
	if dynamic == 0 {
		return out, nil
	}
	var pods corev1.PodList
	// The cache holds only game-server Pods; they are read, never modified, so no copies.
	if err := r.List(ctx, &pods, client.HasLabels{v1alpha1.LabelGameServer}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list game-server pods: %w", err)
	}
	used := map[int32]bool{}
	for i := range pods.Items {
		for _, c := range pods.Items[i].Spec.Containers {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					used[p.HostPort] = true
				}
			}
		}
	}
	picked, err := r.ports.pick(used, dynamic, time.Now())
	if err != nil {
		return nil, err
	}
	for _, p := range gs.Spec.Ports {
		if p.PortPolicy != v1alpha1.PortPolicyStatic && p.PortPolicy != v1alpha1.PortPolicyNone {
			out[p.Name], picked = picked[0], picked[1:]
		}
	}
	return out, nil
}

// reconcileAddress records where players reach the server: the node's address and the host port,
// or the Pod IP and container port when the game port has no host port.
func (r *GameServerReconciler) reconcileAddress(ctx context.Context, gs *v1alpha1.GameServer, pod *corev1.Pod) error {
	if pod == nil {
		return nil
	}
	gs.Status.NodeName = pod.Spec.NodeName
	hostPort, containerPort := gamePortAt(gs, pod)
	if hostPort == 0 {
		gs.Status.Address, gs.Status.Port = pod.Status.PodIP, containerPort
		return nil
	}
	gs.Status.Port = hostPort
	if pod.Spec.NodeName == "" {
		return nil
	}
	node := &corev1.Node{}
	err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	gs.Status.Address = nodeAddress(node, pod)
	return nil
}

// nodeAddress is where players reach a host port of the node: its ExternalIP, else its
// InternalIP, else the host IP the kubelet reports. Players connect from outside the cluster, and
// where a node has both (a cloud's VM), only the ExternalIP reaches it from there; a node with
// only an InternalIP (bare metal, a LAN, the local node) is reached there. Agones chooses the same.
func nodeAddress(node *corev1.Node, pod *corev1.Pod) string {
	for _, want := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type == want && a.Address != "" {
				return a.Address
			}
		}
	}
	return pod.Status.HostIP
}

// reconcileState moves the state machine — the Pod's view (nextState), then the process's
// lifecycle (lifecycleState) and its health (healthState) — records the players, counters and
// reservation the process reports, and sets the Ready and Healthy conditions. It returns when
// to look again: when the health check runs out, or the held room is released.
func (r *GameServerReconciler) reconcileState(gs *v1alpha1.GameServer, pod *corev1.Pod, view *lifecycleView) time.Duration {
	st := gs.Status.Netcode
	configRunning := st.InstanceID != "" && st.AppliedGeneration > 0
	prev := gs.Status.State
	next := nextState(prev, pod, configRunning)
	var obs *netcode.LifecycleStatus
	if view != nil && view.seen {
		obs = &view.status
	}
	next = lifecycleState(next, obs, gs.Status.AllocatedBy, pod != nil && podReady(pod) && configRunning)
	now := time.Now()
	var requeue time.Duration
	unhealthy := false
	if view != nil && !gs.Spec.Health.Disabled {
		until := view.healthyUntil(unhealthyAfter(gs))
		unhealthy = !now.Before(until)
		if !unhealthy {
			requeue = until.Sub(now) + time.Millisecond
		}
	}
	next = healthState(next, unhealthy, gs.Spec.Health)
	ended := prev == v1alpha1.GameServerStateAllocated && next != v1alpha1.GameServerStateAllocated
	gs.Status.Players = playersStatus(gs.Status.Players, obs, ended || next.IsFinal(), now)
	if p := gs.Status.Players; p != nil && p.PendingUntil != nil {
		requeue = shortest(requeue, p.PendingUntil.Sub(now)+time.Millisecond)
	}
	if next != prev {
		gs.Status.State = next
		kind := corev1.EventTypeNormal
		if next == v1alpha1.GameServerStateError || next == v1alpha1.GameServerStateUnhealthy {
			kind = corev1.EventTypeWarning
		}
		r.recorder.Eventf(gs, nil, kind, string(next), "UpdateState", "state %q -> %q", prev, next)
	}
	applyLifecycleStatus(&gs.Status, obs)
	meta.SetStatusCondition(&gs.Status.Conditions, readyCondition(gs.Status.State, pod, gs.Generation))
	if view != nil {
		r.setHealthyCondition(gs, unhealthy, view)
	}
	return requeue
}

// setHealthyCondition records the health check's result; an Allocated server that failed it and
// is kept gets a warning event, once.
func (r *GameServerReconciler) setHealthyCondition(gs *v1alpha1.GameServer, unhealthy bool, view *lifecycleView) {
	c := metav1.Condition{Type: v1alpha1.ConditionHealthy, Status: metav1.ConditionTrue, ObservedGeneration: gs.Generation,
		Reason: "Answering", Message: "the process answers its health check"}
	if gs.Spec.Health.Disabled {
		c.Reason, c.Message = "Disabled", "the health check is disabled (spec.health.disabled)"
	}
	if unhealthy {
		c.Status, c.Reason = metav1.ConditionFalse, "NotAnswering"
		c.Message = fmt.Sprintf("no passed health check for %ds", unhealthyAfter(gs)/time.Second)
		if !view.healthyAt.IsZero() {
			c.Message += " (last at " + view.healthyAt.UTC().Format(time.RFC3339) + ")"
		}
		if prev := meta.FindStatusCondition(gs.Status.Conditions, v1alpha1.ConditionHealthy); gs.Status.State == v1alpha1.GameServerStateAllocated &&
			(prev == nil || prev.Status != metav1.ConditionFalse) {
			r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, "UnhealthyAllocated", "CheckHealth",
				"the Allocated server failed its health check and is kept for its match (spec.health.replaceAllocated is false)")
		}
	}
	meta.SetStatusCondition(&gs.Status.Conditions, c)
}

// watchLifecycle follows the lifecycle of the server's running process and returns what the
// watch has seen, or nil while there is no process to watch.
func (r *GameServerReconciler) watchLifecycle(ctx context.Context, gs *v1alpha1.GameServer, pod *corev1.Pod) *lifecycleView {
	key := client.ObjectKeyFromObject(gs)
	if gs.Status.State.IsFinal() || pod == nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		r.watches.stop(key)
		return nil
	}
	view := r.watches.ensure(ctx, gs, adminEndpoint(gs, pod))
	return &view
}

// unhealthyAfter is spec.health.unhealthyAfterSeconds, defaulted.
func unhealthyAfter(gs *v1alpha1.GameServer) time.Duration {
	if s := gs.Spec.Health.UnhealthyAfterSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	return 30 * time.Second
}

// shortest is the sooner of two requeues, 0 meaning none.
func shortest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// fail moves the GameServer to Error for a reason that retrying cannot fix, and returns the
// terminal error.
func (r *GameServerReconciler) fail(gs *v1alpha1.GameServer, reason string, err error) error {
	gs.Status.State = v1alpha1.GameServerStateError
	r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, reason, "CreatePod", "%v", err)
	return reconcile.TerminalError(err)
}

// pendingOf is the room allocations hold on gs.
func pendingOf(gs *v1alpha1.GameServer) int32 {
	if gs.Status.Players == nil {
		return 0
	}
	return gs.Status.Players.Pending
}

// patchStatus patches the status when it changed. A change of the state or of the held room
// carries the resourceVersion, so it cannot overwrite what an allocation wrote meanwhile.
func (r *GameServerReconciler) patchStatus(ctx context.Context, base, gs *v1alpha1.GameServer) error {
	if equality.Semantic.DeepEqual(base.Status, gs.Status) {
		return nil
	}
	patch := client.MergeFrom(base)
	if base.Status.State != gs.Status.State || pendingOf(base) != pendingOf(gs) {
		patch = client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	}
	return r.Status().Patch(ctx, gs, patch)
}
