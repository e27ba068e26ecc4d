package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// AllocationReconciler serves GameServerAllocation resources: each new one (no status.state yet)
// is allocated once through the Allocator, and the result written to its status.
type AllocationReconciler struct {
	client.Client
	alloc       *Allocator
	concurrency int

	// results holds the allocations this process served: those whose status write failed, so
	// the retry records that server instead of taking a second one, and, for servedTTL, those it
	// recorded, so a reconcile that reads the request from a cache not yet showing the result
	// records it again instead of taking a second server.
	mu        sync.Mutex
	results   map[types.NamespacedName]servedAllocation
	lastSweep time.Time
}

// servedAllocation is the result of one allocation request (by UID).
type servedAllocation struct {
	uid      types.UID
	status   v1alpha1.GameServerAllocationStatus
	recorded time.Time // when its status was written; zero while it is not
}

// servedTTL is how long a recorded result is kept: far longer than the operator's cache takes to
// show a status it wrote.
const servedTTL = time.Minute

// NewAllocationReconciler returns a reconciler that serves requests through alloc, concurrency
// at a time (default 16).
func NewAllocationReconciler(mgr ctrl.Manager, alloc *Allocator, concurrency int) *AllocationReconciler {
	if concurrency <= 0 {
		concurrency = 16
	}
	return &AllocationReconciler{
		Client: mgr.GetClient(), alloc: alloc, concurrency: concurrency,
		results: map[types.NamespacedName]servedAllocation{},
	}
}

// allocatedByField indexes the operator's cached GameServers by status.allocatedBy.
const allocatedByField = "status.allocatedBy"

// SetupWithManager registers the reconciler for allocations that have no result yet, and the
// GameServer index it finds earlier results by.
func (r *AllocationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.GameServer{}, allocatedByField, func(o client.Object) []string {
		if gs, ok := o.(*v1alpha1.GameServer); ok && gs.Status.AllocatedBy != "" {
			return []string{gs.Status.AllocatedBy}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index gameservers by %s: %w", allocatedByField, err)
	}
	pending := predicate.NewPredicateFuncs(func(o client.Object) bool {
		a, ok := o.(*v1alpha1.GameServerAllocation)
		return ok && a.Status.State == ""
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.GameServerAllocation{}, builder.WithPredicates(pending)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.concurrency}).
		Named("gameserverallocation").
		Complete(r)
}

// +kubebuilder:rbac:groups=netfleet.io,resources=gameserverallocations,verbs=get;list;watch
// +kubebuilder:rbac:groups=netfleet.io,resources=gameserverallocations/status,verbs=get;patch
// +kubebuilder:rbac:groups=netfleet.io,resources=gameservers,verbs=get;patch
// +kubebuilder:rbac:groups=netfleet.io,resources=gameservers/status,verbs=get;patch

// Reconcile serves one allocation request, once.
func (r *AllocationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &v1alpha1.GameServerAllocation{}
	if err := r.Get(ctx, req.NamespacedName, a); err != nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if a.Status.State != "" || !a.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	st, err := r.serve(ctx, req.NamespacedName, a)
	if err != nil {
		return ctrl.Result{}, err
	}
	if st.State == v1alpha1.AllocationAllocated {
		// The game learns its match before the result is recorded and handed out. A failed
		// delivery is retried: the result is kept, so the retry delivers to the same server.
		if err := r.alloc.Finish(ctx, a.Namespace, a.Spec, a.Name, a.UID, st.GameServerName); err != nil {
			if apierrors.IsNotFound(err) {
				// The server is gone before its game learned the match: the retry allocates
				// another one.
				r.forget(req.NamespacedName)
			} else {
				r.remember(req.NamespacedName, servedAllocation{uid: a.UID, status: st})
			}
			return ctrl.Result{}, err
		}
	}
	base := a.DeepCopy()
	a.Status = st
	if err := r.Status().Patch(ctx, a, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			// The request was withdrawn after it was served; the server stays Allocated, as it
			// would had the requester read the answer and gone away.
			ctrl.LoggerFrom(ctx).Info("allocation deleted before its result was recorded", "gameserver", st.GameServerName)
			return ctrl.Result{}, nil
		}
		r.remember(req.NamespacedName, servedAllocation{uid: a.UID, status: st})
		return ctrl.Result{}, fmt.Errorf("record allocation result: %w", err)
	}
	r.remember(req.NamespacedName, servedAllocation{uid: a.UID, status: st, recorded: time.Now()})
	ctrl.LoggerFrom(ctx).V(1).Info("allocation served", "state", st.State, "gameserver", st.GameServerName, "reason", st.Reason)
	return ctrl.Result{}, nil
}

// serve returns the result for a: the one this process served for it, the server an earlier
// attempt marked with its UID, or a new allocation.
func (r *AllocationReconciler) serve(ctx context.Context, key types.NamespacedName, a *v1alpha1.GameServerAllocation) (v1alpha1.GameServerAllocationStatus, error) {
	if st, ok := r.pending(key, a.UID); ok {
		return st, nil
	}
	st, ok, err := r.servedEarlier(ctx, a)
	if !ok && err == nil {
		st, err = r.alloc.AllocateFor(ctx, a)
	}
	if err != nil {
		return st, err
	}
	return r.alloc.WithTokens(ctx, a.Namespace, &a.Spec, a.UID, st)
}

// servedEarlier finds the server an earlier attempt allocated for a, one whose result was never
// recorded (the operator stopped, or lost leadership, between the two writes): the server marked
// with a's UID. The operator's cache lists every GameServer when it starts, so a new leader sees
// the marks of the old one.
func (r *AllocationReconciler) servedEarlier(ctx context.Context, a *v1alpha1.GameServerAllocation) (v1alpha1.GameServerAllocationStatus, bool, error) {
	var list v1alpha1.GameServerList
	if err := r.List(ctx, &list, client.InNamespace(a.Namespace), client.MatchingFields{allocatedByField: string(a.UID)}); err != nil {
		return v1alpha1.GameServerAllocationStatus{}, false, fmt.Errorf("list gameservers allocated by %s: %w", a.Name, err)
	}
	if len(list.Items) == 0 {
		return v1alpha1.GameServerAllocationStatus{}, false, nil
	}
	gs := &list.Items[0]
	ctrl.LoggerFrom(ctx).Info("allocation was served before its result was recorded; recording it now", "gameserver", gs.Name)
	return allocatedTo(gs), true, nil
}

// pending returns the result this process served for the request key with that uid, if it has
// one: not recorded yet, or recorded within servedTTL.
func (r *AllocationReconciler) pending(key types.NamespacedName, uid types.UID) (v1alpha1.GameServerAllocationStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.results[key]
	return s.status, ok && s.uid == uid && (s.recorded.IsZero() || time.Since(s.recorded) < servedTTL)
}

// remember keeps s for key, and drops the recorded results older than servedTTL, at most once
// per half of it.
func (r *AllocationReconciler) remember(key types.NamespacedName, s servedAllocation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[key] = s
	if now := time.Now(); now.Sub(r.lastSweep) >= servedTTL/2 {
		r.lastSweep = now
		for k, v := range r.results {
			if !v.recorded.IsZero() && now.Sub(v.recorded) >= servedTTL {
				delete(r.results, k)
			}
		}
	}
}

func (r *AllocationReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.results, key)
	r.mu.Unlock()
}
