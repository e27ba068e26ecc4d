package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// FleetAutoscalerOptions tunes the FleetAutoscaler reconciler. Zero fields take the defaults
// below.
type FleetAutoscalerOptions struct {
	// MaxConcurrentReconciles is how many FleetAutoscalers are reconciled at once. Default 4.
	MaxConcurrentReconciles int
	// WebhookRetryBase and WebhookRetryMax bound the back-off after a failed webhook call: the
	// n-th failure in a row waits WebhookRetryBase doubled n-1 times, at most WebhookRetryMax
	// (±10%). Defaults 1s and 1m.
	WebhookRetryBase, WebhookRetryMax time.Duration
}

func (o *FleetAutoscalerOptions) setDefaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.WebhookRetryBase <= 0 {
		o.WebhookRetryBase = time.Second
	}
	if o.WebhookRetryMax <= 0 {
		o.WebhookRetryMax = time.Minute
	}
}

// defaultSyncInterval is spec.sync.intervalSeconds when the API server did not default it.
const defaultSyncInterval = 30 * time.Second

// fleetNameField indexes the operator's cached FleetAutoscalers by spec.fleetName.
const fleetNameField = "spec.fleetName"

// FleetAutoscalerReconciler sets each FleetAutoscaler's fleet's spec.replicas from its policy. It
// reacts to the changes that move a buffer — a server allocated, ended, created or removed, an
// edit of the fleet — through watches on GameServers and Fleets, so an allocation reaches the
// fleet's replicas in one watch delivery and one write; spec.sync.intervalSeconds is only the
// floor. It counts the servers from the operator's cache itself rather than waiting for the
// fleet's status. Scaling down is the Fleet reconciler's, which never removes an Allocated
// server.
type FleetAutoscalerReconciler struct {
	client.Client
	recorder events.EventRecorder
	opts     FleetAutoscalerOptions
	webhook  *webhookCaller

	mu sync.Mutex
	// failures holds the webhook autoscalers whose last calls failed, for their back-off.
	failures map[types.NamespacedName]webhookFailures
	// written holds the last replicas each autoscaler wrote, with the fleet's resourceVersion
	// before the write: while the cache still shows that version, the write is what counts.
	written map[types.NamespacedName]replicasWrite
}

// webhookFailures counts the failed calls in a row of one autoscaler's webhook, at one
// generation of the autoscaler (an edit starts afresh).
type webhookFailures struct {
	generation int64
	count      int
	retryAt    time.Time
	last       metav1.Condition
}

// replicasWrite is one write of a fleet's spec.replicas.
type replicasWrite struct {
	fleet    types.UID
	before   string // the fleet's resourceVersion the write was decided on
	replicas int32
}

// NewFleetAutoscalerReconciler returns a reconciler that uses mgr's client, cache and event
// recorder.
func NewFleetAutoscalerReconciler(mgr ctrl.Manager, opts FleetAutoscalerOptions) *FleetAutoscalerReconciler {
	opts.setDefaults()
	return &FleetAutoscalerReconciler{
		Client: mgr.GetClient(), recorder: mgr.GetEventRecorder("netfleet-operator"), opts: opts,
		webhook:  newWebhookCaller(),
		failures: map[types.NamespacedName]webhookFailures{},
		written:  map[types.NamespacedName]replicasWrite{},
	}
}

// SetupWithManager registers the reconciler with its index and watches: an edit of an
// autoscaler, the deletion of one (its fleet may pass to another), and for autoscalers in Events
// mode every state change, creation and removal of their fleet's GameServers and every edit of
// the fleet.
func (r *FleetAutoscalerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.FleetAutoscaler{}, fleetNameField, func(o client.Object) []string {
		if fas, ok := o.(*v1alpha1.FleetAutoscaler); ok {
			return []string{fas.Spec.FleetName}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index fleetautoscalers by %s: %w", fleetNameField, err)
	}
	serverMoved := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.GameServer)
		n, ok2 := e.ObjectNew.(*v1alpha1.GameServer)
		return !ok1 || !ok2 || o.Status.State != n.Status.State || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	}}
	fleetEdited := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
	deleted := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.FleetAutoscaler{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.FleetAutoscaler{}, handler.EnqueueRequestsFromMapFunc(r.siblings), builder.WithPredicates(deleted)).
		Watches(&v1alpha1.GameServer{}, handler.EnqueueRequestsFromMapFunc(r.forServer), builder.WithPredicates(serverMoved)).
		Watches(&v1alpha1.Fleet{}, handler.EnqueueRequestsFromMapFunc(r.forFleet), builder.WithPredicates(fleetEdited)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles}).
		Named("fleetautoscaler").
		Complete(r)
}

// +kubebuilder:rbac:groups=netfleet.io,resources=fleetautoscalers,verbs=get;list;watch
// +kubebuilder:rbac:groups=netfleet.io,resources=fleetautoscalers/status,verbs=get;patch
// +kubebuilder:rbac:groups=netfleet.io,resources=fleets,verbs=get;list;watch;patch

// Reconcile decides one autoscaler's fleet's replicas, writes them when they differ, and records
// what it saw and did.
func (r *FleetAutoscalerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fas := &v1alpha1.FleetAutoscaler{}
	if err := r.Get(ctx, req.NamespacedName, fas); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fas.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	base := fas.DeepCopy()
	interval := syncInterval(fas)

	fleet, load, blocked, err := r.observe(ctx, fas)
	if err != nil {
		return ctrl.Result{}, err
	}
	pass := autoscalePass{able: blocked, load: load}
	if blocked == nil {
		pass = r.decide(ctx, fas, fleet, load)
	}
	if pass.able == nil {
		err = r.scale(ctx, fas, fleet, &pass)
	}
	r.recordStatus(fas, base, &pass)
	if err == nil && pass.complete() {
		fas.Status.ObservedGeneration = fas.Generation
	}
	if !equality.Semantic.DeepEqual(base.Status, fas.Status) {
		if perr := r.Status().Patch(ctx, fas, client.MergeFrom(base)); perr != nil && !apierrors.IsNotFound(perr) {
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("patch fleetautoscaler status: %w", perr))
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if pass.terminal != nil {
		return ctrl.Result{}, reconcile.TerminalError(pass.terminal)
	}
	if pass.retryAfter > 0 {
		return ctrl.Result{RequeueAfter: min(pass.retryAfter, interval)}, nil
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// autoscalePass is what one pass of an autoscaler found and did.
type autoscalePass struct {
	load fleetLoad
	// decision is the policy's; nil when the pass stopped before one.
	decision *scaleDecision
	// able is the AbleToScale condition of a pass that cannot scale (the fleet is left alone);
	// nil while it can.
	able *metav1.Condition
	// retryAfter is the back-off of a failed webhook; terminal, an error no retry fixes.
	retryAfter time.Duration
	terminal   error
	// scaled says the pass changed the fleet's replicas; warned, that it recorded a Warning event
	// for its failure (a failed webhook call has one per call).
	scaled, warned bool
}

func (p *autoscalePass) complete() bool { return p.able == nil && p.decision != nil }

// observe reads the autoscaler's fleet and its servers from the cache. It returns the
// AbleToScale condition that stops the pass when the fleet is missing, being deleted or scaled
// by an older autoscaler.
func (r *FleetAutoscalerReconciler) observe(ctx context.Context, fas *v1alpha1.FleetAutoscaler) (*v1alpha1.Fleet, fleetLoad, *metav1.Condition, error) {
	gen := fas.Generation
	fleet := &v1alpha1.Fleet{}
	err := r.Get(ctx, types.NamespacedName{Namespace: fas.Namespace, Name: fas.Spec.FleetName}, fleet)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fleetLoad{}, notAble(gen, v1alpha1.ReasonFleetNotFound, "no Fleet %q in namespace %s", fas.Spec.FleetName, fas.Namespace), nil
	case err != nil:
		return nil, fleetLoad{}, nil, fmt.Errorf("get fleet %s: %w", fas.Spec.FleetName, err)
	case !fleet.DeletionTimestamp.IsZero():
		return nil, fleetLoad{}, notAble(gen, v1alpha1.ReasonFleetDeleting, "fleet %s is being deleted", fleet.Name), nil
	}
	owner, err := r.fleetOwner(ctx, fas)
	if err != nil {
		return nil, fleetLoad{}, nil, err
	}
	if owner != fas.Name {
		return nil, fleetLoad{}, notAble(gen, v1alpha1.ReasonFleetHasOtherAutoscaler,
			"FleetAutoscaler %s, older, scales fleet %s; this one does nothing while it exists", owner, fleet.Name), nil
	}
	load, err := r.load(ctx, client.ObjectKeyFromObject(fas), fleet)
	if err != nil {
		return nil, fleetLoad{}, nil, err
	}
	return fleet, load, nil, nil
}

// fleetOwner names the autoscaler that scales fas's fleet: the oldest of those naming it.
func (r *FleetAutoscalerReconciler) fleetOwner(ctx context.Context, fas *v1alpha1.FleetAutoscaler) (string, error) {
	var list v1alpha1.FleetAutoscalerList
	if err := r.List(ctx, &list, client.InNamespace(fas.Namespace), client.MatchingFields{fleetNameField: fas.Spec.FleetName},
		client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("list fleetautoscalers of fleet %s: %w", fas.Spec.FleetName, err)
	}
	owner := fas
	for i := range list.Items {
		o := &list.Items[i]
		if !o.DeletionTimestamp.IsZero() {
			continue
		}
		if c := cmp.Or(o.CreationTimestamp.Compare(owner.CreationTimestamp.Time), cmp.Compare(o.Name, owner.Name)); c < 0 {
			owner = o
		}
	}
	return owner.Name, nil
}

// load counts the fleet's servers that have not ended, from the cache, and reads the fleet's
// replicas: the cache's, or this reconciler's last write while the cache does not show it yet.
func (r *FleetAutoscalerReconciler) load(ctx context.Context, key types.NamespacedName, fleet *v1alpha1.Fleet) (fleetLoad, error) {
	var list v1alpha1.GameServerList
	if err := r.List(ctx, &list, client.InNamespace(fleet.Namespace),
		client.MatchingLabels{v1alpha1.LabelFleet: fleet.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return fleetLoad{}, fmt.Errorf("list gameservers of fleet %s: %w", fleet.Name, err)
	}
	l := fleetLoad{replicas: r.replicas(key, fleet)}
	for i := range list.Items {
		gs := &list.Items[i]
		if !live(gs) || !metav1.IsControlledBy(gs, fleet) {
			continue
		}
		l.current++
		switch gs.Status.State {
		case v1alpha1.GameServerStateReady:
			l.ready++
		case v1alpha1.GameServerStateAllocated:
			l.allocated++
		}
	}
	return l, nil
}

// decide runs the autoscaler's policy. A webhook in back-off is not called: the pass keeps the
// failure's condition and waits out the rest of the back-off.
func (r *FleetAutoscalerReconciler) decide(ctx context.Context, fas *v1alpha1.FleetAutoscaler, fleet *v1alpha1.Fleet, load fleetLoad) autoscalePass {
	pass := autoscalePass{load: load}
	p := fas.Spec.Policy
	switch {
	case p.Type == v1alpha1.FleetAutoscalerPolicyBuffer && p.Buffer != nil:
		d, err := decideBuffer(*p.Buffer, load.allocated)
		if err != nil {
			// The CRD refuses such a buffer; only an edit fixes it.
			pass.able, pass.terminal = notAble(fas.Generation, v1alpha1.ReasonInvalidPolicy, "%s", err), err
			return pass
		}
		pass.decision = &d
	case p.Type == v1alpha1.FleetAutoscalerPolicyWebhook && p.Webhook != nil:
		r.decideWebhook(ctx, fas, fleet, &pass)
	default:
		err := fmt.Errorf("spec.policy: type %q without its settings", p.Type)
		pass.able, pass.terminal = notAble(fas.Generation, v1alpha1.ReasonInvalidPolicy, "%s", err), err
	}
	return pass
}

// decideWebhook calls the webhook, unless it is in back-off after failed calls, and records a
// failure: the fleet stays as it is, the condition and an event say why, and the call is tried
// again after the back-off.
func (r *FleetAutoscalerReconciler) decideWebhook(ctx context.Context, fas *v1alpha1.FleetAutoscaler, fleet *v1alpha1.Fleet, pass *autoscalePass) {
	key := client.ObjectKeyFromObject(fas)
	if f, waiting := r.backoff(key, fas.Generation); waiting {
		pass.able, pass.retryAfter = &f.last, time.Until(f.retryAt)
		return
	}
	status := fleet.Status
	status.Replicas, status.ReadyReplicas, status.AllocatedReplicas = pass.load.current, pass.load.ready, pass.load.allocated
	req := &v1alpha1.FleetAutoscaleRequest{
		UID: uuid.NewUUID(), Name: fleet.Name, Namespace: fleet.Namespace, Replicas: pass.load.replicas, Status: status,
		MetaData: &metav1.ObjectMeta{Name: fleet.Name, Namespace: fleet.Namespace, UID: fleet.UID, Generation: fleet.Generation,
			Labels: fleet.Labels, Annotations: fleet.Annotations},
	}
	resp, err := r.webhook.call(ctx, fas.Spec.Policy.Webhook, fas.Namespace, req)
	if err != nil {
		reason := v1alpha1.ReasonWebhookUnreachable // call returns *webhookError only
		if we, ok := errors.AsType[*webhookError](err); ok {
			reason = we.reason
		}
		c := notAble(fas.Generation, reason, "%s; the fleet is left at %d replicas", err, pass.load.replicas)
		// Every failure backs off, an invalid CA bundle too: it needs an edit, but the fleet's
		// changes would otherwise try it again on every allocation.
		pass.able, pass.retryAfter = c, r.failed(key, fas.Generation, *c)
		r.recorder.Eventf(fas, fleet, corev1.EventTypeWarning, "WebhookFailed", "CallWebhook", "%s", truncate(c.Message))
		pass.warned = true
		return
	}
	r.succeeded(key)
	d := scaleDecision{replicas: pass.load.replicas, wanted: pass.load.replicas, limit: v1alpha1.ReasonWithinLimits,
		why: "the webhook answered scale: false"}
	if resp.Scale {
		d.replicas, d.wanted, d.why = resp.Replicas, resp.Replicas, fmt.Sprintf("the webhook answered %d", resp.Replicas)
	}
	pass.decision = &d
}

// scale writes the decided replicas to the fleet when they differ from its own.
func (r *FleetAutoscalerReconciler) scale(ctx context.Context, fas *v1alpha1.FleetAutoscaler, fleet *v1alpha1.Fleet, pass *autoscalePass) error {
	key := client.ObjectKeyFromObject(fas)
	have, want := pass.load.replicas, pass.decision.replicas
	if have == want {
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, want)
	target := &v1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.Namespace, Name: fleet.Name}}
	if err := r.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		pass.able = notAble(fas.Generation, v1alpha1.ReasonScaleFailed, "set fleet %s to %d replicas: %s", fleet.Name, want, err)
		return fmt.Errorf("scale fleet %s to %d replicas: %w", fleet.Name, want, err)
	}
	r.mu.Lock()
	r.written[key] = replicasWrite{fleet: fleet.UID, before: fleet.ResourceVersion, replicas: want}
	r.mu.Unlock()
	pass.scaled = true
	reason := "ScaledUp"
	if want < have {
		reason = "ScaledDown"
	}
	r.recorder.Eventf(fas, fleet, corev1.EventTypeNormal, reason, "Scale", "fleet %s from %d to %d replicas: %s", fleet.Name, have, want, pass.decision.why)
	return nil
}

// recordStatus sets the autoscaler's status from the pass, and records a Warning event when the
// pass is stopped by something new that it has not recorded yet.
func (r *FleetAutoscalerReconciler) recordStatus(fas, base *v1alpha1.FleetAutoscaler, pass *autoscalePass) {
	st := &fas.Status
	gen := fas.Generation
	st.CurrentReplicas, st.AllocatedReplicas = pass.load.current, pass.load.allocated
	if d := pass.decision; d != nil {
		st.DesiredReplicas = d.replicas
		limited := metav1.Condition{Type: v1alpha1.ConditionScalingLimited, ObservedGeneration: gen, Status: metav1.ConditionFalse,
			Reason: d.limit, Message: fmt.Sprintf("%d replicas: %s", d.replicas, d.why)}
		if d.limit != v1alpha1.ReasonWithinLimits {
			limited.Status = metav1.ConditionTrue
			limited.Message = fmt.Sprintf("the policy wants %d replicas (%s), capped to %d", d.wanted, d.why, d.replicas)
		}
		meta.SetStatusCondition(&st.Conditions, limited)
	}
	if pass.scaled {
		now := metav1.Now()
		st.LastScaleTime = &now
	}
	able := metav1.Condition{Type: v1alpha1.ConditionAbleToScale, ObservedGeneration: gen, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonScalingSucceeded}
	switch {
	case pass.able != nil:
		able = *pass.able
	case pass.decision != nil:
		able.Message = fmt.Sprintf("fleet %s at %d replicas: %s", fas.Spec.FleetName, pass.decision.replicas, pass.decision.why)
	}
	prev := meta.FindStatusCondition(base.Status.Conditions, v1alpha1.ConditionAbleToScale)
	if able.Status == metav1.ConditionFalse && !pass.warned && (prev == nil || prev.Reason != able.Reason) {
		r.recorder.Eventf(fas, nil, corev1.EventTypeWarning, able.Reason, "Scale", "%s", truncate(able.Message))
	}
	able.Message = truncate(able.Message)
	meta.SetStatusCondition(&st.Conditions, able)
}

// replicas is the fleet's spec.replicas as this reconciler knows it: its own last write while
// the cache still shows the version that write was decided on.
func (r *FleetAutoscalerReconciler) replicas(key types.NamespacedName, fleet *v1alpha1.Fleet) int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.written[key]; ok && w.fleet == fleet.UID && w.before == fleet.ResourceVersion {
		return w.replicas
	}
	return fleet.Spec.Replicas
}

// backoff returns the failures of key's webhook at generation gen, and whether the next call must
// wait.
func (r *FleetAutoscalerReconciler) backoff(key types.NamespacedName, gen int64) (webhookFailures, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failures[key]
	return f, ok && f.generation == gen && time.Now().Before(f.retryAt)
}

// failed counts a failed call of key's webhook and returns the back-off before the next one.
func (r *FleetAutoscalerReconciler) failed(key types.NamespacedName, gen int64, c metav1.Condition) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.failures[key]
	if f.generation != gen {
		f = webhookFailures{generation: gen}
	}
	f.count++
	d := retryDelay(f.count, r.opts.WebhookRetryBase, r.opts.WebhookRetryMax)
	f.retryAt, f.last = time.Now().Add(d), c
	r.failures[key] = f
	return d
}

func (r *FleetAutoscalerReconciler) succeeded(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.failures, key)
	r.mu.Unlock()
}

func (r *FleetAutoscalerReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.failures, key)
	delete(r.written, key)
	r.mu.Unlock()
}

// forServer maps a GameServer to the Events-mode autoscalers of its fleet.
func (r *FleetAutoscalerReconciler) forServer(ctx context.Context, o client.Object) []reconcile.Request {
	fleet := o.GetLabels()[v1alpha1.LabelFleet]
	if fleet == "" {
		return nil
	}
	return r.autoscalersOf(ctx, o.GetNamespace(), fleet, true)
}

// forFleet maps a Fleet to its Events-mode autoscalers.
func (r *FleetAutoscalerReconciler) forFleet(ctx context.Context, o client.Object) []reconcile.Request {
	return r.autoscalersOf(ctx, o.GetNamespace(), o.GetName(), true)
}

// siblings maps a deleted autoscaler to the others of its fleet, one of which may scale it now.
func (r *FleetAutoscalerReconciler) siblings(ctx context.Context, o client.Object) []reconcile.Request {
	fas, ok := o.(*v1alpha1.FleetAutoscaler)
	if !ok {
		return nil
	}
	return r.autoscalersOf(ctx, fas.Namespace, fas.Spec.FleetName, false)
}

// autoscalersOf lists the autoscalers naming fleet in ns from the cache, only those in Events
// mode when eventsOnly is set.
func (r *FleetAutoscalerReconciler) autoscalersOf(ctx context.Context, ns, fleet string, eventsOnly bool) []reconcile.Request {
	var list v1alpha1.FleetAutoscalerList
	if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{fleetNameField: fleet}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list fleetautoscalers of a fleet", "namespace", ns, "fleet", fleet)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		fas := &list.Items[i]
		if eventsOnly && fas.Spec.Sync.Mode == v1alpha1.FleetAutoscalerSyncInterval {
			continue
		}
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(fas)})
	}
	return out
}

// syncInterval is the autoscaler's spec.sync.intervalSeconds.
func syncInterval(fas *v1alpha1.FleetAutoscaler) time.Duration {
	if s := fas.Spec.Sync.IntervalSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	return defaultSyncInterval
}

// notAble is an AbleToScale condition False with reason and a formatted message.
func notAble(gen int64, reason, format string, args ...any) *metav1.Condition {
	return &metav1.Condition{Type: v1alpha1.ConditionAbleToScale, ObservedGeneration: gen, Status: metav1.ConditionFalse,
		Reason: reason, Message: fmt.Sprintf(format, args...)}
}
