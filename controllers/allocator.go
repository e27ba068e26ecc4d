package controllers

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	connectTokensIssued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "netfleet_operator_connect_tokens_issued_total",
		Help: "Connect tokens issued to the players named by allocations.",
	})
	allocationReplays = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "netfleet_operator_allocation_replays_total",
		Help: "Allocator requests with an Idempotency-Key answered with the result of an earlier " +
			"request with the same key (retries that allocated nothing more).",
	})
)

func init() {
	metrics.Registry.MustRegister(allocationDuration, allocationConflicts, allocationReplays, connectTokensIssued)
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
	// rv is the resourceVersion the mark wrote: once the cache shows it, the index is up to date
	// with the mark and the claim has done its work.
	rv string
}

// Allocator serves allocation requests: it picks a Ready GameServer that matches the request and
// marks it Allocated with a status patch guarded by the resourceVersion it read. The API server
// accepts exactly one such mark per server, so no server is handed out twice — not by two
// requests of one operator, nor by two operator replicas each with its own cache. Its index of
// Ready servers and its in-process claims only propose candidates and keep concurrent requests of
// this process off the same server (fewer conflicts); they decide nothing.
type Allocator struct {
	index   *readyIndex
	deliver AllocationDeliverer
	api     client.Reader // fresh reads after a conflict
	write   client.Client
	keys    *ConnectKeyStore

	mu        sync.Mutex
	claims    map[types.UID]*claim
	lastSweep time.Time
}

// NewAllocator returns an Allocator that learns the Ready servers from the GameServer informer of
// informers (the operator's cache), reads single servers fresh through api after a conflict, and
// writes through write. Call it before the cache starts or after; it answers once the informer
// has synced.
func NewAllocator(ctx context.Context, informers cache.Informers, api client.Reader, write client.Client) (*Allocator, error) {
	inf, err := informers.GetInformer(ctx, &v1alpha1.GameServer{})
	if err != nil {
		return nil, fmt.Errorf("gameserver informer: %w", err)
	}
	index := newReadyIndex()
	a := &Allocator{index: index, api: api, write: write, claims: map[types.UID]*claim{},
		keys: NewConnectKeyStore(api, write, ConnectKeyOptions{})}
	index.seen = a.seen
	reg, err := inf.AddEventHandler(index)
	if err != nil {
		return nil, fmt.Errorf("gameserver informer handler: %w", err)
	}
	index.synced = reg.HasSynced
	return a, nil
}

// seen drops the claim on a server the cache now shows as the claim's mark left it: the index
// is past the mark, so the server is a candidate again exactly when it is free again (its match
// ended) or still has room (backfill).
func (a *Allocator) seen(uid types.UID, rv string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.claims[uid]; ok && c.taken && c.rv == rv {
		delete(a.claims, uid)
	}
}

// Allocate serves one request in namespace ns, as the allocation uid (the caller makes it up; the
// allocator endpoint answers it in metadata.uid). A request that cannot be served (no Ready
// server, invalid selector) is an UnAllocated status, not an error; an error means the API
// server could not be reached or refused a write for another reason than a conflict.
//
// The server it takes is marked with uid; the connect tokens of the players the request names
// are bound to it; and the allocation is delivered to the server's process before Allocate
// returns. If the tokens cannot be issued or the allocation cannot be delivered, the mark is
// undone and Allocate returns the error.
func (a *Allocator) Allocate(ctx context.Context, ns string, spec v1alpha1.GameServerAllocationSpec, source string, uid types.UID) (v1alpha1.GameServerAllocationStatus, error) {
	start := time.Now()
	st, undo, err := a.allocate(ctx, ns, spec, uid)
	if err == nil && st.State == v1alpha1.AllocationAllocated {
		st, err = a.WithTokens(ctx, ns, &spec, uid, st)
		if err == nil {
			err = a.Finish(ctx, ns, spec, "", uid, st.GameServerName)
		}
		if err != nil {
			err = errors.Join(err, undo(ctx))
		}
	}
	a.observe(source, start, st, err)
	return st, err
}

// AllocateFor serves the GameServerAllocation rec as Allocate does, and marks the server it
// takes with rec's UID (status.allocatedBy) in the same write. It does not deliver the
// allocation: the caller calls Finish, before it records the result, so that an operator that
// stops in between finishes the delivery on its next try (the server is found by the mark).
func (a *Allocator) AllocateFor(ctx context.Context, rec *v1alpha1.GameServerAllocation) (v1alpha1.GameServerAllocationStatus, error) {
	start := time.Now()
	st, _, err := a.allocate(ctx, rec.Namespace, rec.Spec, rec.UID)
	a.observe(allocSourceResource, start, st, err)
	return st, err
}

func (a *Allocator) observe(source string, start time.Time, st v1alpha1.GameServerAllocationStatus, err error) {
	result := string(st.State)
	if err != nil {
		result = "error"
	}
	allocationDuration.WithLabelValues(source, result).Observe(time.Since(start).Seconds())
}

// undoFunc undoes the mark of an allocation.
type undoFunc func(context.Context) error

func (a *Allocator) allocate(ctx context.Context, ns string, spec v1alpha1.GameServerAllocationSpec, by types.UID) (v1alpha1.GameServerAllocationStatus, undoFunc, error) {
	sel, err := spec.LabelSelector()
	if err != nil {
		return unallocated(v1alpha1.AllocationReasonInvalid, err.Error()), nil, nil
	}
	if err := validateAllocationSpec(spec); err != nil {
		return unallocated(v1alpha1.AllocationReasonInvalid, err.Error()), nil, nil
	}
	candidates, err := a.index.candidates(ctx, ns, sel, spec.Room())
	if err != nil {
		return v1alpha1.GameServerAllocationStatus{}, nil, err
	}
	matched := candidates.Len()
	// First the servers no request of this process is trying, then those whose claim ended
	// without taking them — or, for a request that asks for room, took them and may have left
	// room (backfill).
	backfill := spec.Room() > 0
	var waiting []*v1alpha1.GameServer
	for gs := candidates.Next(); gs != nil; gs = candidates.Next() {
		c, mine, taken, stale := a.claim(gs.UID, backfill)
		if !mine {
			if !taken {
				waiting = append(waiting, gs)
			}
			continue
		}
		st, undo, ok, err := a.mark(ctx, gs, sel, spec.Room(), c, by, stale)
		if ok || err != nil {
			return st, undo, err
		}
	}
	for _, gs := range waiting {
		for {
			c, mine, taken, stale := a.claim(gs.UID, backfill)
			if mine {
				st, undo, ok, err := a.mark(ctx, gs, sel, spec.Room(), c, by, stale)
				if ok || err != nil {
					return st, undo, err
				}
				break
			}
			if taken {
				break
			}
			select {
			case <-ctx.Done():
				return v1alpha1.GameServerAllocationStatus{}, nil, ctx.Err()
			case <-c.done:
			}
		}
	}
	msg := fmt.Sprintf("no Ready GameServer matches %s in namespace %s", describeSelector(spec), ns)
	if spec.Room() > 0 {
		msg = fmt.Sprintf("no GameServer with room for %d players matches %s in namespace %s", spec.Room(), describeSelector(spec), ns)
	}
	if matched > 0 {
		msg += fmt.Sprintf(" (%d did, and other allocations took them first)", matched)
	}
	return unallocated(v1alpha1.AllocationReasonNoReadyServer, msg), nil, nil
}

// pendingRoomTTL is how long the room an allocation took for its players is held for them.
const pendingRoomTTL = time.Minute

// mark tries to mark gs Allocated for the claim c (which it ends), with status.allocatedBy by,
// and holds room for room players in the same write, re-reading the server when it changed since
// it was read. The write carries the resourceVersion read, so of two allocations that read the
// same room only one takes it. It reports whether it took the server, and how to undo the mark.
//
// With stale set the cached gs is older than a mark of this process, and it is read fresh first.
func (a *Allocator) mark(ctx context.Context, gs *v1alpha1.GameServer, sel labels.Selector, room int32, c *claim, by types.UID, stale bool) (v1alpha1.GameServerAllocationStatus, undoFunc, bool, error) {
	taken, rv := false, ""
	defer func() { a.release(gs.UID, c, taken, rv) }()
	cur := gs
	if stale {
		fresh, ok, err := a.refresh(ctx, gs, sel, room)
		if !ok || err != nil {
			return v1alpha1.GameServerAllocationStatus{}, nil, false, err
		}
		cur = fresh
	}
	for range triesPerServer {
		patch, err := markPatch(cur, room, by, time.Now())
		if err != nil {
			return v1alpha1.GameServerAllocationStatus{}, nil, false, err
		}
		out := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: gs.Namespace, Name: gs.Name}}
		err = a.write.Status().Patch(ctx, out, client.RawPatch(types.MergePatchType, patch))
		switch {
		case err == nil:
			taken, rv = true, out.ResourceVersion
			return allocatedTo(out), a.undo(cur, out, room), true, nil
		case apierrors.IsNotFound(err):
			return v1alpha1.GameServerAllocationStatus{}, nil, false, nil
		case !apierrors.IsConflict(err):
			return v1alpha1.GameServerAllocationStatus{}, nil, false, fmt.Errorf("mark gameserver %s allocated: %w", gs.Name, err)
		}
		allocationConflicts.Inc()
		fresh, ok, err := a.refresh(ctx, gs, sel, room)
		if !ok || err != nil {
			return v1alpha1.GameServerAllocationStatus{}, nil, false, err
		}
		cur = fresh
	}
	return v1alpha1.GameServerAllocationStatus{}, nil, false, nil
}

// refresh reads gs fresh from the API server and reports whether it is still the same server,
// eligible for room and matching sel; a server that is gone is not an error.
func (a *Allocator) refresh(ctx context.Context, gs *v1alpha1.GameServer, sel labels.Selector, room int32) (*v1alpha1.GameServer, bool, error) {
	fresh := &v1alpha1.GameServer{}
	if err := a.api.Get(ctx, client.ObjectKeyFromObject(gs), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read gameserver %s: %w", gs.Name, err)
	}
	if fresh.UID != gs.UID || !eligible(fresh, room) || !sel.Matches(labels.Set(fresh.Labels)) {
		return nil, false, nil
	}
	return fresh, true, nil
}

// claim registers this process's attempt on a server. It returns the new claim and mine set
// when the server was free — or, with backfill set, when the claim on it has finished and took
// it, in which case stale says the cache may not show that mark yet; otherwise the existing
// claim, and whether it has finished and took the server.
func (a *Allocator) claim(uid types.UID, backfill bool) (c *claim, mine, taken, stale bool) {
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
		if !backfill || !c.taken {
			return c, false, c.taken, false
		}
		stale = true
	}
	c = &claim{done: make(chan struct{}), at: now}
	a.claims[uid] = c
	return c, true, false, stale
}

// release ends a claim. A server that was taken stays claimed until the cache has surely shown
// it Allocated; one that was not is free to try again.
func (a *Allocator) release(uid types.UID, c *claim, taken bool, rv string) {
	a.mu.Lock()
	c.taken, c.at, c.rv = taken, time.Now(), rv
	if (!taken || a.index.versionOf(uid) == rv) && a.claims[uid] == c {
		// Not taken, or the cache already shows the mark.
		delete(a.claims, uid)
	}
	a.mu.Unlock()
	close(c.done)
}

// allocatable reports whether a server can be allocated: Ready and not being deleted.
func allocatable(gs *v1alpha1.GameServer) bool {
	return gs.Status.State == v1alpha1.GameServerStateReady && gs.DeletionTimestamp.IsZero()
}

// backfillable reports whether an Allocated server may take more players of its match: its game
// declared a capacity and it has room left.
func backfillable(gs *v1alpha1.GameServer) bool {
	free, declared := roomFor(gs)
	return gs.Status.State == v1alpha1.GameServerStateAllocated && gs.DeletionTimestamp.IsZero() && declared && free > 0
}

// eligible reports whether gs can serve a request for room players: a Ready server with that
// much room (or no declared capacity), or, for a request that asks for room, an Allocated one
// with that much room.
func eligible(gs *v1alpha1.GameServer, room int32) bool {
	free, declared := roomFor(gs)
	switch {
	case allocatable(gs):
		return room == 0 || !declared || free >= room
	case room > 0 && backfillable(gs):
		return free >= room
	}
	return false
}

// readyIndex is the Allocator's view of the informer: the Ready servers of each namespace and
// the number of Allocated servers on each node. It holds the informer's own objects, which are
// never modified; a request scans pointers instead of copying every server out of the cache.
type readyIndex struct {
	synced func() bool
	// seen, if set, learns every server version the index takes in.
	seen func(uid types.UID, rv string)

	mu        sync.RWMutex
	versions  map[types.UID]string                          // server -> resourceVersion in the cache
	ready     map[string]map[types.UID]*v1alpha1.GameServer // namespace -> Ready servers
	backfill  map[string]map[types.UID]*v1alpha1.GameServer // namespace -> Allocated servers with room
	allocated map[string]int                                // node -> Allocated servers
}

func newReadyIndex() *readyIndex {
	return &readyIndex{
		versions:  map[types.UID]string{},
		ready:     map[string]map[types.UID]*v1alpha1.GameServer{},
		backfill:  map[string]map[types.UID]*v1alpha1.GameServer{},
		allocated: map[string]int{},
	}
}

// OnAdd, OnUpdate and OnDelete keep the index (a toolscache.ResourceEventHandler).
func (x *readyIndex) OnAdd(obj any, _ bool) { x.take(nil, asGameServer(obj)) }

func (x *readyIndex) OnUpdate(old, cur any) { x.take(asGameServer(old), asGameServer(cur)) }

func (x *readyIndex) take(old, cur *v1alpha1.GameServer) {
	x.replace(old, cur)
	if cur != nil && x.seen != nil {
		x.seen(cur.UID, cur.ResourceVersion)
	}
}

func (x *readyIndex) OnDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	x.replace(asGameServer(obj), nil)
}

func asGameServer(obj any) *v1alpha1.GameServer {
	gs, _ := obj.(*v1alpha1.GameServer)
	return gs
}

// replace takes old (nil when new) out of the index and puts cur (nil when deleted) in.
func (x *readyIndex) replace(old, cur *v1alpha1.GameServer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old != nil {
		if old.Status.State == v1alpha1.GameServerStateAllocated {
			if x.allocated[old.Status.NodeName]--; x.allocated[old.Status.NodeName] <= 0 {
				delete(x.allocated, old.Status.NodeName)
			}
		}
		unindex(x.ready, old)
		unindex(x.backfill, old)
		delete(x.versions, old.UID)
	}
	if cur == nil {
		return
	}
	x.versions[cur.UID] = cur.ResourceVersion
	if cur.Status.State == v1alpha1.GameServerStateAllocated {
		x.allocated[cur.Status.NodeName]++
	}
	switch {
	case allocatable(cur):
		index(x.ready, cur)
	case backfillable(cur):
		index(x.backfill, cur)
	}
}

// versionOf is the resourceVersion of the server uid in the cache.
func (x *readyIndex) versionOf(uid types.UID) string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.versions[uid]
}

func index(m map[string]map[types.UID]*v1alpha1.GameServer, gs *v1alpha1.GameServer) {
	byUID := m[gs.Namespace]
	if byUID == nil {
		byUID = map[types.UID]*v1alpha1.GameServer{}
		m[gs.Namespace] = byUID
	}
	byUID[gs.UID] = gs
}

func unindex(m map[string]map[types.UID]*v1alpha1.GameServer, gs *v1alpha1.GameServer) {
	if byUID := m[gs.Namespace]; byUID != nil {
		delete(byUID, gs.UID)
		if len(byUID) == 0 {
			delete(m, gs.Namespace)
		}
	}
}

// candidates returns the servers of ns that sel matches and that can serve a request for room
// players, as a queue that hands them out in the order they are tried (see candidateQueue): for
// a request that asks for room, the Allocated servers with enough room first (backfill), then
// the Ready ones. It waits until the informer has synced, so that no request is refused for want
// of a full view.
func (x *readyIndex) candidates(ctx context.Context, ns string, sel labels.Selector, room int32) (*candidateQueue, error) {
	for !x.synced() {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the gameserver cache: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	x.mu.RLock()
	q := &candidateQueue{h: make([]candidate, 0, len(x.ready[ns]))}
	add := func(gs *v1alpha1.GameServer, backfill bool) {
		if eligible(gs, room) && sel.Matches(labels.Set(gs.Labels)) {
			q.h = append(q.h, candidate{gs: gs, backfill: backfill, packed: x.allocated[gs.Status.NodeName], created: gs.CreationTimestamp.UnixNano()})
		}
	}
	if room > 0 {
		for _, gs := range x.backfill[ns] {
			add(gs, true)
		}
	}
	for _, gs := range x.ready[ns] {
		add(gs, false)
	}
	x.mu.RUnlock()
	q.init()
	return q, nil
}

// candidate is a Ready server with the keys it is ranked by, read once.
type candidate struct {
	gs       *v1alpha1.GameServer
	backfill bool  // an Allocated server with room: a running match is filled before a new one starts
	packed   int   // Allocated servers on its node
	created  int64 // creation time, Unix nanoseconds
}

// before reports whether c is tried before d. Servers on the nodes that already run the most
// Allocated servers come first, so matches pack onto few nodes and the rest can drain; then the
// newest server, so that during a rollout the servers of the current template take matches and
// the older ones are left to be replaced; then by name, so the order is total.
func (c *candidate) before(d *candidate) bool {
	if c.backfill != d.backfill {
		return c.backfill
	}
	if c.packed != d.packed {
		return c.packed > d.packed
	}
	if c.created != d.created {
		return c.created > d.created
	}
	return c.gs.Name < d.gs.Name
}

// candidateQueue hands out candidates best first. It is a binary heap: a request nearly always
// takes one of its first few candidates, so building the heap (linear in the number of Ready
// servers) and popping a few costs far less than sorting them all, which a fleet of thousands of
// Ready servers would pay on every allocation.
type candidateQueue struct {
	h candidateHeap
}

// Len is the number of candidates not handed out yet.
func (q *candidateQueue) Len() int { return len(q.h) }

func (q *candidateQueue) init() { heap.Init(&q.h) }

// Next returns the best candidate left, nil when none is.
func (q *candidateQueue) Next() *v1alpha1.GameServer {
	if len(q.h) == 0 {
		return nil
	}
	return heap.Pop(&q.h).(*v1alpha1.GameServer)
}

// candidateHeap is the heap.Interface of candidateQueue; Pop returns the server alone.
type candidateHeap []candidate

func (h candidateHeap) Len() int           { return len(h) }
func (h candidateHeap) Less(i, j int) bool { return h[i].before(&h[j]) }
func (h candidateHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candidateHeap) Push(x any)        { *h = append(*h, x.(candidate)) }

func (h *candidateHeap) Pop() any {
	old := *h
	n := len(old) - 1
	gs := old[n].gs
	old[n] = candidate{}
	*h = old[:n]
	return gs
}

// allocatedTo is the result of an allocation that took gs.
func allocatedTo(gs *v1alpha1.GameServer) v1alpha1.GameServerAllocationStatus {
	return v1alpha1.GameServerAllocationStatus{
		State: v1alpha1.AllocationAllocated, GameServerName: gs.Name,
		Address: gs.Status.Address, Port: gs.Status.Port, NodeName: gs.Status.NodeName,
	}
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
