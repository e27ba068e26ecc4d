package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// FleetOptions tunes the Fleet reconciler. Zero fields take the defaults below.
type FleetOptions struct {
	// MaxConcurrentReconciles is how many Fleets are reconciled at once. Default 4.
	MaxConcurrentReconciles int
	// Writes is how many writes (create, remove, netcode patch) one pass of a fleet issues at
	// once. Default 32.
	Writes int
	// CacheWait bounds the wait, after a pass created or removed servers, for the cache to show
	// them, so the next pass does not count them twice. Default 10s.
	CacheWait time.Duration
}

func (o *FleetOptions) setDefaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.Writes <= 0 {
		o.Writes = 32
	}
	if o.CacheWait <= 0 {
		o.CacheWait = 10 * time.Second
	}
}

// fleetRetry is when a pass that lost a race (a server changed while it was removing it) looks
// again.
const fleetRetry = 250 * time.Millisecond

// FleetReconciler keeps each Fleet's GameServers: it creates and removes them to match
// spec.replicas, replaces ended ones, rolls them on a template edit, and patches spec.netcode of
// every one of them in place on a netcode-only edit. The Fleet owns its GameServers directly (no
// intermediate set): every decision needs the state of each server — Allocated ones are never
// removed, and netcode goes to servers of every template — so one level keeps it in one place.
type FleetReconciler struct {
	client.Client
	recorder events.EventRecorder
	opts     FleetOptions
}

// NewFleetReconciler returns a reconciler that uses mgr's client, cache and event recorder.
func NewFleetReconciler(mgr ctrl.Manager, opts FleetOptions) *FleetReconciler {
	opts.setDefaults()
	return &FleetReconciler{Client: mgr.GetClient(), recorder: mgr.GetEventRecorder("netfleet-operator"), opts: opts}
}

// SetupWithManager registers the reconciler; every change of a fleet's GameServers reconciles
// the fleet.
func (r *FleetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Fleet{}).
		Owns(&v1alpha1.GameServer{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles}).
		Named("fleet").
		Complete(r)
}

// +kubebuilder:rbac:groups=netfleet.io,resources=fleets,verbs=get;list;watch
// +kubebuilder:rbac:groups=netfleet.io,resources=fleets/status,verbs=get;patch
// +kubebuilder:rbac:groups=netfleet.io,resources=fleets/finalizers,verbs=update
// +kubebuilder:rbac:groups=netfleet.io,resources=gameservers,verbs=get;list;watch;create;patch;delete

// Reconcile brings one Fleet one step closer to its spec and records what it saw.
func (r *FleetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fleet := &v1alpha1.Fleet{}
	if err := r.Get(ctx, req.NamespacedName, fleet); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fleet.DeletionTimestamp.IsZero() {
		// The garbage collector removes the servers with their owner.
		return ctrl.Result{}, nil
	}
	base := fleet.DeepCopy()
	hash, err := templateHash(&fleet.Spec.Template)
	if err != nil {
		return ctrl.Result{}, err
	}
	_, unavailable, err := rolloutBounds(fleet.Spec.Strategy, int(fleet.Spec.Replicas))
	if err != nil {
		// The CRD refuses such a strategy; only an edit of the Fleet can fix it.
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	servers, err := r.listServers(ctx, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}

	var lost bool
	err = r.reconcileNetcode(ctx, fleet, servers)
	if err == nil {
		lost, err = r.reconcileServers(ctx, fleet, servers, hash)
	}
	r.reconcileStatus(fleet, servers, hash, unavailable)
	if err == nil && !lost {
		fleet.Status.ObservedGeneration = fleet.Generation
	}
	if !equality.Semantic.DeepEqual(base.Status, fleet.Status) {
		if perr := r.Status().Patch(ctx, fleet, client.MergeFrom(base)); perr != nil && !apierrors.IsNotFound(perr) {
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("patch fleet status: %w", perr))
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if lost {
		return ctrl.Result{RequeueAfter: fleetRetry}, nil
	}
	return ctrl.Result{}, nil
}

// listServers returns the fleet's GameServers from the cache. They are the cache's own objects:
// read them, never modify them.
func (r *FleetReconciler) listServers(ctx context.Context, fleet *v1alpha1.Fleet) ([]*v1alpha1.GameServer, error) {
	var list v1alpha1.GameServerList
	if err := r.List(ctx, &list, client.InNamespace(fleet.Namespace),
		client.MatchingLabels{v1alpha1.LabelFleet: fleet.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list gameservers of fleet %s: %w", fleet.Name, err)
	}
	out := make([]*v1alpha1.GameServer, 0, len(list.Items))
	for i := range list.Items {
		// A server with the label that the fleet does not control is not adopted.
		if metav1.IsControlledBy(&list.Items[i], fleet) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// reconcileNetcode sets spec.netcode of every server of the fleet that has not ended — whatever
// its template or state, Allocated ones included — to the fleet's; the GameServer reconciler
// pushes it into the running process. No Pod is touched. It waits until the cache shows the
// patches, so that the passes the servers' changes trigger meanwhile do not patch them again.
func (r *FleetReconciler) reconcileNetcode(ctx context.Context, fleet *v1alpha1.Fleet, servers []*v1alpha1.GameServer) error {
	want := &fleet.Spec.Template.Spec.Netcode
	var stale []*v1alpha1.GameServer
	for _, gs := range servers {
		if live(gs) && !equality.Semantic.DeepEqual(&gs.Spec.Netcode, want) {
			stale = append(stale, gs)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	value, err := json.Marshal(want)
	if err != nil {
		return fmt.Errorf("encode netcode: %w", err)
	}
	// One JSON patch replaces the whole object, so a field the fleet no longer sets goes too.
	patch := fmt.Appendf(nil, `[{"op":"add","path":"/spec/netcode","value":%s}]`, value)
	var mu sync.Mutex
	var patched []*v1alpha1.GameServer
	err = r.each(ctx, stale, func(ctx context.Context, gs *v1alpha1.GameServer) error {
		target := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: gs.Namespace, Name: gs.Name}}
		switch err := r.Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch)); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("patch netcode of gameserver %s: %w", gs.Name, err)
		}
		mu.Lock()
		patched = append(patched, target)
		mu.Unlock()
		return nil
	})
	if len(patched) > 0 {
		r.recorder.Eventf(fleet, nil, corev1.EventTypeNormal, "NetcodeUpdated", "PatchNetcode",
			"set the fleet's netcode on %d servers in place", len(patched))
	}
	return errors.Join(err, r.waitForCache(ctx, nil, nil, patched))
}

// reconcileServers removes ended servers, then carries out one step of planFleet. It reports
// whether it lost a race with another writer (an allocation) and should look again soon.
func (r *FleetReconciler) reconcileServers(ctx context.Context, fleet *v1alpha1.Fleet, servers []*v1alpha1.GameServer, hash string) (bool, error) {
	var ended, running []*v1alpha1.GameServer
	var view []fleetServer
	for _, gs := range servers {
		switch {
		case !gs.DeletionTimestamp.IsZero():
		case gs.Status.State.IsFinal():
			ended = append(ended, gs)
		default:
			running = append(running, gs)
			view = append(view, fleetServer{
				name: gs.Name, state: gs.Status.State, current: gs.Labels[v1alpha1.LabelTemplateHash] == hash,
				created: gs.CreationTimestamp.Time,
			})
		}
	}
	plan, err := planFleet(int(fleet.Spec.Replicas), fleet.Spec.Strategy, view)
	if err != nil {
		return false, err
	}
	remove := ended
	for _, i := range plan.remove {
		remove = append(remove, running[i])
	}
	removed, lost, err := r.removeServers(ctx, remove)
	if err != nil {
		return lost, err
	}
	created, err := r.createServers(ctx, fleet, hash, plan.create)
	if len(ended) > 0 {
		r.recorder.Eventf(fleet, nil, corev1.EventTypeNormal, "Replacing", "RemoveServers",
			"removed %d ended servers (Shutdown or Error): %s", len(ended), nameList(ended))
	}
	if n := len(removed) - len(ended); n > 0 {
		r.recorder.Eventf(fleet, nil, corev1.EventTypeNormal, "Removed", "RemoveServers", "removed %d servers", n)
	}
	if len(created) > 0 {
		r.recorder.Eventf(fleet, nil, corev1.EventTypeNormal, "Created", "CreateServers", "created %d servers", len(created))
	}
	if werr := r.waitForCache(ctx, created, removed, nil); werr != nil {
		err = errors.Join(err, werr)
	}
	return lost, err
}

// removeServers deletes servers, each only at the resourceVersion the plan saw: a server an
// allocation marked meanwhile is not removed (the delete conflicts and the fleet looks again).
// It returns the servers it removed and whether it lost such a race.
func (r *FleetReconciler) removeServers(ctx context.Context, servers []*v1alpha1.GameServer) ([]*v1alpha1.GameServer, bool, error) {
	var mu sync.Mutex
	var removed []*v1alpha1.GameServer
	var lost bool
	err := r.each(ctx, servers, func(ctx context.Context, gs *v1alpha1.GameServer) error {
		uid, rv := gs.UID, gs.ResourceVersion
		err := r.Delete(ctx, gs, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			removed = append(removed, gs)
		case apierrors.IsConflict(err):
			lost = true
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("remove gameserver %s: %w", gs.Name, err)
		}
		return nil
	})
	return removed, lost, err
}

// createServers creates n servers from the fleet's template.
func (r *FleetReconciler) createServers(ctx context.Context, fleet *v1alpha1.Fleet, hash string, n int) ([]*v1alpha1.GameServer, error) {
	out := make([]*v1alpha1.GameServer, n)
	for i := range out {
		gs, err := r.newServer(fleet, hash)
		if err != nil {
			return nil, err
		}
		out[i] = gs
	}
	var mu sync.Mutex
	var created []*v1alpha1.GameServer
	err := r.each(ctx, out, func(ctx context.Context, gs *v1alpha1.GameServer) error {
		if err := r.Create(ctx, gs); err != nil {
			return fmt.Errorf("create gameserver of fleet %s: %w", fleet.Name, err)
		}
		mu.Lock()
		created = append(created, gs)
		mu.Unlock()
		return nil
	})
	return created, err
}

// newServer is a GameServer from the fleet's template, labeled with the fleet and the template
// hash and controlled by the fleet.
func (r *FleetReconciler) newServer(fleet *v1alpha1.Fleet, hash string) (*v1alpha1.GameServer, error) {
	t := fleet.Spec.Template.DeepCopy()
	gs := &v1alpha1.GameServer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    fleet.Namespace,
			GenerateName: fleet.Name + "-",
			Labels:       t.Labels,
			Annotations:  t.Annotations,
		},
		Spec: t.Spec,
	}
	if gs.Labels == nil {
		gs.Labels = map[string]string{}
	}
	gs.Labels[v1alpha1.LabelFleet] = fleet.Name
	gs.Labels[v1alpha1.LabelTemplateHash] = hash
	if err := controllerutil.SetControllerReference(fleet, gs, r.Scheme()); err != nil {
		return nil, fmt.Errorf("set owner of gameserver: %w", err)
	}
	return gs, nil
}

// waitForCache waits until the cache shows the created servers, no longer shows the removed
// ones, and shows the patched ones at their new generation, so the next pass acts on none of
// them twice.
func (r *FleetReconciler) waitForCache(ctx context.Context, created, removed, patched []*v1alpha1.GameServer) error {
	if len(created)+len(removed)+len(patched) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.CacheWait)
	defer cancel()
	pending := func() (int, error) {
		n := 0
		var gs v1alpha1.GameServer
		for _, c := range created {
			if err := r.Get(ctx, client.ObjectKeyFromObject(c), &gs); apierrors.IsNotFound(err) {
				n++
			} else if err != nil {
				return 0, fmt.Errorf("read gameserver %s from the cache: %w", c.Name, err)
			}
		}
		for _, d := range removed {
			err := r.Get(ctx, client.ObjectKeyFromObject(d), &gs)
			switch {
			case err == nil && gs.UID == d.UID && gs.DeletionTimestamp.IsZero():
				n++
			case err != nil && !apierrors.IsNotFound(err):
				return 0, fmt.Errorf("read gameserver %s from the cache: %w", d.Name, err)
			}
		}
		for _, p := range patched {
			err := r.Get(ctx, client.ObjectKeyFromObject(p), &gs)
			switch {
			case err == nil && gs.UID == p.UID && gs.Generation < p.Generation:
				n++
			case err != nil && !apierrors.IsNotFound(err):
				return 0, fmt.Errorf("read gameserver %s from the cache: %w", p.Name, err)
			}
		}
		return n, nil
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := pending()
		if err != nil || n == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cache does not show %d of the fleet's changes yet: %w", n, ctx.Err())
		case <-tick.C:
		}
	}
}

// each runs fn for every server, at most opts.Writes at once, and returns the first error.
func (r *FleetReconciler) each(ctx context.Context, servers []*v1alpha1.GameServer, fn func(context.Context, *v1alpha1.GameServer) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Writes)
	for _, gs := range servers {
		g.Go(func() error { return fn(gctx, gs) })
	}
	return g.Wait()
}

// reconcileStatus counts the fleet's servers and sets its conditions.
func (r *FleetReconciler) reconcileStatus(fleet *v1alpha1.Fleet, servers []*v1alpha1.GameServer, hash string, unavailable int) {
	st := &fleet.Status
	st.Selector = labels.SelectorFromSet(labels.Set{v1alpha1.LabelFleet: fleet.Name}).String()
	var replicas, ready, allocated, reserved, oldAllocated, applied, updated, refused, players, capacity int32
	var refusedExample string
	for _, gs := range servers {
		if !live(gs) {
			continue
		}
		replicas++
		switch gs.Status.State {
		case v1alpha1.GameServerStateReady:
			ready++
		case v1alpha1.GameServerStateAllocated:
			allocated++
		case v1alpha1.GameServerStateReserved:
			reserved++
		}
		if p := gs.Status.Players; p != nil {
			players, capacity = players+p.Connected, capacity+p.Capacity
		}
		switch {
		case gs.Labels[v1alpha1.LabelTemplateHash] == hash:
			updated++
		case gs.Status.State == v1alpha1.GameServerStateAllocated || gs.Status.State == v1alpha1.GameServerStateReserved:
			oldAllocated++
		}
		switch c := meta.FindStatusCondition(gs.Status.Conditions, v1alpha1.ConditionConfigApplied); {
		case !equality.Semantic.DeepEqual(&gs.Spec.Netcode, &fleet.Spec.Template.Spec.Netcode):
		case c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gs.Generation &&
			gs.Status.Netcode.AppliedGeneration == gs.Generation:
			applied++
		case c != nil && c.Reason == v1alpha1.ReasonRefused && c.ObservedGeneration == gs.Generation:
			refused++
			if refusedExample == "" {
				refusedExample = gs.Name + ": " + c.Message
			}
		}
	}
	st.Replicas, st.ReadyReplicas, st.AllocatedReplicas, st.ReservedReplicas = replicas, ready, allocated, reserved
	st.Players, st.PlayerCapacity = players, capacity
	st.ConfigAppliedReplicas, st.UpdatedReplicas = applied, updated
	st.Config = fmt.Sprintf("%d/%d", applied, replicas)

	gen := fleet.Generation
	want := fleet.Spec.Replicas
	avail := metav1.Condition{Type: v1alpha1.ConditionAvailable, ObservedGeneration: gen, Status: metav1.ConditionTrue,
		Reason: "MinimumServersUp", Message: fmt.Sprintf("%d of %d servers are up (Ready or Allocated)", ready+allocated, want)}
	if ready+allocated < want-int32(unavailable) {
		avail.Status, avail.Reason = metav1.ConditionFalse, "TooFewServersUp"
	}
	meta.SetStatusCondition(&st.Conditions, avail)

	prog := metav1.Condition{Type: v1alpha1.ConditionProgressing, ObservedGeneration: gen, Status: metav1.ConditionTrue}
	switch {
	case updated < replicas && updated+oldAllocated == replicas && replicas == want:
		prog.Reason = "WaitingForAllocated"
		prog.Message = fmt.Sprintf("%d Allocated servers of an older template stay until their match ends", replicas-updated)
	case updated < replicas:
		prog.Reason, prog.Message = "RollingUpdate", fmt.Sprintf("%d of %d servers run the current template", updated, replicas)
	case replicas != want:
		prog.Reason, prog.Message = "Scaling", fmt.Sprintf("%d servers, %d wanted", replicas, want)
	case ready+allocated < replicas:
		prog.Reason, prog.Message = "Starting", fmt.Sprintf("%d of %d servers are up", ready+allocated, replicas)
	default:
		prog.Status, prog.Reason = metav1.ConditionFalse, "Complete"
		prog.Message = fmt.Sprintf("all %d servers run the current template and are up", replicas)
	}
	meta.SetStatusCondition(&st.Conditions, prog)

	cfg := metav1.Condition{Type: v1alpha1.ConditionConfigApplied, ObservedGeneration: gen, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonApplied, Message: fmt.Sprintf("%d/%d servers run the fleet's netcode", applied, replicas)}
	switch {
	case refused > 0:
		cfg.Status, cfg.Reason = metav1.ConditionFalse, v1alpha1.ReasonRefused
		cfg.Message = truncate(fmt.Sprintf("%s; %d refused it (%s)", cfg.Message, refused, refusedExample))
	case applied < replicas:
		cfg.Status, cfg.Reason = metav1.ConditionFalse, v1alpha1.ReasonPending
	}
	meta.SetStatusCondition(&st.Conditions, cfg)
}

// live reports whether a server counts for its fleet: it exists and has not ended.
func live(gs *v1alpha1.GameServer) bool {
	return gs.DeletionTimestamp.IsZero() && !gs.Status.State.IsFinal()
}

// nameList names up to five servers, for an event.
func nameList(servers []*v1alpha1.GameServer) string {
	names := make([]string, 0, 5)
	for _, gs := range servers[:min(len(servers), 5)] {
		names = append(names, gs.Name)
	}
	s := strings.Join(names, ", ")
	if len(servers) > 5 {
		s += fmt.Sprintf(" and %d more", len(servers)-5)
	}
	return s
}
