package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// Where an allocation request came from, the values of the source label.
const (
	allocSourceResource = "resource"
	allocSourceHTTP     = "http"
)

var (
	allocationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "netfleet_operator_allocation_duration_seconds",
		Help:    "Duration of one allocation, by source (resource, http) and result (Allocated, UnAllocated, error).",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"source", "result"})
	allocationConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "netfleet_operator_allocation_conflicts_total",
		Help: "Marks of a server as Allocated refused because the server changed since it was read " +
			"(another allocation, another operator replica or its own controller wrote it first).",
	})
)

func init() {
	metrics.Registry.MustRegister(allocationDuration, allocationConflicts)
}

const (
	// claimTTL is how long a server taken by this process stays skipped while the cache may
	// still show it Ready; the cache shows the change long before.
	claimTTL = 30 * time.Second
	// triesPerServer bounds the marks of one server that keeps changing under an allocation.
	triesPerServer = 3
)

// claim is an allocation of this process trying one server. done closes when it has finished;
// taken says whether it marked the server.
type claim struct {
	done  chan struct{}
	taken bool
	at    time.Time
}

// Allocator serves allocation requests: it picks a Ready GameServer that matches the request and
// marks it Allocated with a status patch guarded by the resourceVersion it read. The API server
// accepts exactly one such mark per server, so no server is handed out twice — not by two
// requests of one operator, nor by two operator replicas each with its own cache. In-process
// claims only keep concurrent requests of this process off the same server (fewer conflicts);
// they decide nothing.
type Allocator struct {
	cache client.Reader // candidates
	api   client.Reader // fresh reads after a conflict
	write client.Client

	mu        sync.Mutex
	claims    map[types.UID]*claim
	lastSweep time.Time
}

// NewAllocator returns an Allocator that lists candidates through cache, reads single servers
// fresh through api after a conflict, and writes through write.
func NewAllocator(cache, api client.Reader, write client.Client) *Allocator {
	return &Allocator{cache: cache, api: api, write: write, claims: map[types.UID]*claim{}}
}

// Allocate serves one request in namespace ns. A request that cannot be served (no Ready
// server, invalid selector) is an UnAllocated status, not an error; an error means the API
// server could not be reached or refused a write for another reason than a conflict.
func (a *Allocator) Allocate(ctx context.Context, ns string, spec v1alpha1.GameServerAllocationSpec, source string) (v1alpha1.GameServerAllocationStatus, error) {
	start := time.Now()
	st, err := a.allocate(ctx, ns, spec)
	result := string(st.State)
	if err != nil {
		result = "error"
	}
	allocationDuration.WithLabelValues(source, result).Observe(time.Since(start).Seconds())
	return st, err
}

func (a *Allocator) allocate(ctx context.Context, ns string, spec v1alpha1.GameServerAllocationSpec) (v1alpha1.GameServerAllocationStatus, error) {
	sel, err := allocationSelector(spec)
	if err != nil {
		return unallocated(v1alpha1.AllocationReasonInvalid, err.Error()), nil
	}
	var list v1alpha1.GameServerList
	// The cache's own objects: read, never modified.
	if err := a.cache.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return v1alpha1.GameServerAllocationStatus{}, fmt.Errorf("list gameservers: %w", err)
	}
	candidates := rankCandidates(list.Items)

	// First the servers no request of this process is trying, then those whose claim ended
	// without taking them.
	var waiting []*v1alpha1.GameServer
	for _, gs := range candidates {
		c, mine, taken := a.claim(gs.UID)
		if !mine {
			if !taken {
				waiting = append(waiting, gs)
			}
			continue
		}
		st, ok, err := a.mark(ctx, gs, sel, c)
		if ok || err != nil {
			return st, err
		}
	}
	for _, gs := range waiting {
		if c := a.claimOf(gs.UID); c != nil {
			select {
			case <-ctx.Done():
				return v1alpha1.GameServerAllocationStatus{}, ctx.Err()
			case <-c.done:
			}
		}
		c, mine, _ := a.claim(gs.UID)
		if !mine {
			continue
		}
		st, ok, err := a.mark(ctx, gs, sel, c)
		if ok || err != nil {
			return st, err
		}
	}
	return unallocated(v1alpha1.AllocationReasonNoReadyServer, fmt.Sprintf(
		"no Ready GameServer matches %s in namespace %s (%d match, none Ready and free)", describeSelector(spec), ns, len(list.Items))), nil
}

// mark tries to mark gs Allocated for the claim c (which it ends), re-reading the server when it
// changed since it was read. It reports whether it took the server.
func (a *Allocator) mark(ctx context.Context, gs *v1alpha1.GameServer, sel labels.Selector, c *claim) (v1alpha1.GameServerAllocationStatus, bool, error) {
	taken := false
	defer func() { a.release(gs.UID, c, taken) }()
	rv := gs.ResourceVersion
	for range triesPerServer {
		patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"status":{"state":%q}}`, rv, v1alpha1.GameServerStateAllocated)
		out := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: gs.Namespace, Name: gs.Name}}
		err := a.write.Status().Patch(ctx, out, client.RawPatch(types.MergePatchType, patch))
		switch {
		case err == nil:
			taken = true
			return v1alpha1.GameServerAllocationStatus{
				State: v1alpha1.AllocationAllocated, GameServerName: out.Name,
				Address: out.Status.Address, Port: out.Status.Port, NodeName: out.Status.NodeName,
			}, true, nil
		case apierrors.IsNotFound(err):
			return v1alpha1.GameServerAllocationStatus{}, false, nil
		case !apierrors.IsConflict(err):
			return v1alpha1.GameServerAllocationStatus{}, false, fmt.Errorf("mark gameserver %s allocated: %w", gs.Name, err)
		}
		allocationConflicts.Inc()
		fresh := &v1alpha1.GameServer{}
		if err := a.api.Get(ctx, client.ObjectKeyFromObject(gs), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return v1alpha1.GameServerAllocationStatus{}, false, nil
			}
			return v1alpha1.GameServerAllocationStatus{}, false, fmt.Errorf("read gameserver %s: %w", gs.Name, err)
		}
		if fresh.UID != gs.UID || !allocatable(fresh) || !sel.Matches(labels.Set(fresh.Labels)) {
			return v1alpha1.GameServerAllocationStatus{}, false, nil
		}
		rv = fresh.ResourceVersion
	}
	return v1alpha1.GameServerAllocationStatus{}, false, nil
}

// claim registers this process's attempt on a server. It returns the new claim and mine set when
// the server was free; otherwise the existing claim and whether that one took the server.
func (a *Allocator) claim(uid types.UID) (c *claim, mine, taken bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if now.Sub(a.lastSweep) > claimTTL {
		for k, c := range a.claims {
			if c.taken && now.Sub(c.at) > claimTTL {
				delete(a.claims, k)
			}
		}
		a.lastSweep = now
	}
	if c, ok := a.claims[uid]; ok {
		return c, false, c.taken
	}
	c = &claim{done: make(chan struct{}), at: now}
	a.claims[uid] = c
	return c, true, false
}

func (a *Allocator) claimOf(uid types.UID) *claim {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.claims[uid]
}

// release ends a claim. A server that was taken stays claimed until the cache has surely shown
// it Allocated; one that was not is free to try again.
func (a *Allocator) release(uid types.UID, c *claim, taken bool) {
	a.mu.Lock()
	c.taken, c.at = taken, time.Now()
	if !taken {
		delete(a.claims, uid)
	}
	a.mu.Unlock()
	close(c.done)
}

// allocationSelector is the label selector of a request: its selector and, when it names one,
// its fleet.
func allocationSelector(spec v1alpha1.GameServerAllocationSpec) (labels.Selector, error) {
	sel := labels.Everything()
	if spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("spec.selector: %w", err)
		}
		sel = s
	}
	if spec.Fleet != "" {
		if errs := validation.IsDNS1123Label(spec.Fleet); len(errs) > 0 {
			return nil, fmt.Errorf("spec.fleet %q: %s", spec.Fleet, errs[0])
		}
		req, err := labels.NewRequirement(v1alpha1.LabelFleet, selection.Equals, []string{spec.Fleet})
		if err != nil {
			return nil, fmt.Errorf("spec.fleet: %w", err)
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

// allocatable reports whether a server can be allocated: Ready and not being deleted.
func allocatable(gs *v1alpha1.GameServer) bool {
	return gs.Status.State == v1alpha1.GameServerStateReady && gs.DeletionTimestamp.IsZero()
}

// rankCandidates returns the allocatable servers of items in the order they are tried. Servers
// on the nodes that already run the most Allocated servers come first, so matches pack onto
// few nodes and the rest can drain; then the newest server, so that during a rollout the
// servers of the current template take matches and the older ones are left to be replaced.
func rankCandidates(items []v1alpha1.GameServer) []*v1alpha1.GameServer {
	allocatedOn := map[string]int{}
	var out []*v1alpha1.GameServer
	for i := range items {
		gs := &items[i]
		if gs.Status.State == v1alpha1.GameServerStateAllocated {
			allocatedOn[gs.Status.NodeName]++
		}
		if allocatable(gs) {
			out = append(out, gs)
		}
	}
	slices.SortFunc(out, func(x, y *v1alpha1.GameServer) int {
		return cmp.Or(
			cmp.Compare(allocatedOn[y.Status.NodeName], allocatedOn[x.Status.NodeName]),
			y.CreationTimestamp.Compare(x.CreationTimestamp.Time),
			cmp.Compare(x.Name, y.Name),
		)
	})
	return out
}

func unallocated(reason, msg string) v1alpha1.GameServerAllocationStatus {
	return v1alpha1.GameServerAllocationStatus{State: v1alpha1.AllocationUnAllocated, Reason: reason, Message: truncate(msg)}
}

// describeSelector says what a request asks for, for an UnAllocated message.
func describeSelector(spec v1alpha1.GameServerAllocationSpec) string {
	what := "any server"
	if spec.Fleet != "" {
		what = "fleet " + spec.Fleet
	}
	if spec.Selector != nil {
		what += " with labels " + metav1.FormatLabelSelector(spec.Selector)
	}
	return what
}
