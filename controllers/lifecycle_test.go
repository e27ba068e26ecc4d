package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/gameserver/lifecycle"
)

// procLifecycle is the lifecycle of the process the fake kubelet runs for gs.
func procLifecycle(t testing.TB, gs *v1alpha1.GameServer) *lifecycle.Lifecycle {
	t.Helper()
	run := kube.pod(client.ObjectKeyFromObject(gs))
	if run == nil || run.current() == nil {
		t.Fatalf("no process for %s", gs.Name)
	}
	return run.current().lc
}

// waitState waits until gs is in state want and cond (nil: none) holds of it.
func waitState(t testing.TB, gs *v1alpha1.GameServer, want v1alpha1.GameServerState, cond func(*v1alpha1.GameServer) bool) *v1alpha1.GameServer {
	t.Helper()
	var got *v1alpha1.GameServer
	waitFor(t, waitLong, fmt.Sprintf("%s %s", gs.Name, want), func() (bool, error) {
		got = getGS(t, gs)
		return got.Status.State == want && (cond == nil || cond(got)), fmt.Errorf("status %+v", got.Status)
	})
	return got
}

// waitCached waits until the operator's cache shows gs in state want.
func waitCached(t testing.TB, gs *v1alpha1.GameServer, want v1alpha1.GameServerState) {
	t.Helper()
	waitFor(t, waitLong, fmt.Sprintf("%s %s in the operator's cache", gs.Name, want), func() (bool, error) {
		got := &v1alpha1.GameServer{}
		err := operator.Get(context.Background(), client.ObjectKeyFromObject(gs), got)
		return err == nil && got.Status.State == want, err
	})
}

func readyServer(t *testing.T, ns, name string) *v1alpha1.GameServer {
	t.Helper()
	gs := newGameServer(ns, name, v1alpha1.PortPolicyDynamic, 0)
	if err := k8s.Create(context.Background(), gs); err != nil {
		t.Fatal(err)
	}
	got := waitApplied(t, gs, v1alpha1.GameServerStateReady)
	waitCached(t, gs, v1alpha1.GameServerStateReady)
	return got
}

func createAllocation(t *testing.T, ns, name string, spec v1alpha1.GameServerAllocationSpec) *v1alpha1.GameServerAllocation {
	t.Helper()
	a := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8s.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAllocationReachesTheGameFirst: an allocation's labels and annotations land on the
// GameServer, and the process has its name, uid, metadata and payload by the time the
// GameServerAllocation says Allocated.
func TestAllocationReachesTheGameFirst(t *testing.T) {
	ns := newNamespace(t)
	gs := readyServer(t, ns, "match")
	lc := procLifecycle(t, gs)
	var mu sync.Mutex
	var seen []netcode.Allocation
	lc.SetDeliver(func(_ context.Context, a netcode.Allocation) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, a)
		return nil
	})
	a := createAllocation(t, ns, "m1", v1alpha1.GameServerAllocationSpec{
		Metadata: &v1alpha1.AllocationMetadata{Labels: map[string]string{"mode": "ctf"}, Annotations: map[string]string{"netfleet.io/region": "eu-west"}},
		Payload:  `{"map":"dust","teams":2}`,
	})
	st := waitAllocation(t, a)
	// The result is out: the game must have its match already.
	if ls := lc.Status(); ls.State != netcode.LifecycleAllocated || ls.LastAllocationUID != string(a.UID) {
		t.Fatalf("the allocation was recorded before the process had it: %+v", ls)
	}
	if st.State != v1alpha1.AllocationAllocated || st.GameServerName != gs.Name {
		t.Fatalf("allocation %+v", st)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].Name != "m1" || seen[0].UID != string(a.UID) || seen[0].Payload != `{"map":"dust","teams":2}` ||
		seen[0].Labels["mode"] != "ctf" || seen[0].Annotations["netfleet.io/region"] != "eu-west" {
		t.Fatalf("the game saw %+v", seen)
	}
	mu.Unlock()
	got := waitState(t, gs, v1alpha1.GameServerStateAllocated, nil)
	if got.Labels["mode"] != "ctf" || got.Annotations["netfleet.io/region"] != "eu-west" || got.Status.AllocatedBy != string(a.UID) {
		t.Fatalf("gameserver after allocation: labels %v annotations %v allocatedBy %q", got.Labels, got.Annotations, got.Status.AllocatedBy)
	}
}

// TestAllocationMetadataLimits: the API server refuses allocation metadata over its limits and
// names the field; a label the schema cannot check is refused by the operator as Invalid.
func TestAllocationMetadataLimits(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	many := map[string]string{}
	for i := range 33 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, tc := range []struct {
		name, field string
		spec        v1alpha1.GameServerAllocationSpec
	}{
		{"payload", "spec.payload", v1alpha1.GameServerAllocationSpec{Payload: strings.Repeat("x", netcode.MaxAllocationPayloadBytes+1)}},
		{"labels", "spec.metadata.labels", v1alpha1.GameServerAllocationSpec{Metadata: &v1alpha1.AllocationMetadata{Labels: many}}},
		{"label value", "spec.metadata.labels", v1alpha1.GameServerAllocationSpec{Metadata: &v1alpha1.AllocationMetadata{Labels: map[string]string{"a": strings.Repeat("v", 64)}}}},
		{"annotation", "spec.metadata.annotations", v1alpha1.GameServerAllocationSpec{Metadata: &v1alpha1.AllocationMetadata{Annotations: map[string]string{"a": strings.Repeat("v", 1025)}}}},
		{"player room", "spec.playerRoom", v1alpha1.GameServerAllocationSpec{PlayerRoom: 10001}},
	} {
		a := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"}, Spec: tc.spec}
		err := k8s.Create(ctx, a)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want Invalid naming %s", tc.name, err, tc.field)
		}
	}
	a := createAllocation(t, ns, "bad-key", v1alpha1.GameServerAllocationSpec{Metadata: &v1alpha1.AllocationMetadata{Labels: map[string]string{"not a key": "v"}}})
	if st := waitAllocation(t, a); st.State != v1alpha1.AllocationUnAllocated || st.Reason != v1alpha1.AllocationReasonInvalid || !strings.Contains(st.Message, "spec.metadata.labels") {
		t.Fatalf("allocation with a bad label key: %+v", st)
	}
}

// TestMatchEndReusesOrReplaces: a game that calls Ready after its match makes its server Ready
// again and allocatable; one that calls Shutdown ends it, its Fleet replaces it, and a second
// Shutdown is an error.
func TestMatchEndReusesOrReplaces(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "reuse", 1)
	_, servers := createReadyFleet(t, f)
	var gs *v1alpha1.GameServer
	for _, s := range servers {
		gs = s
	}
	lc := procLifecycle(t, gs)

	a1 := createAllocation(t, ns, "first", v1alpha1.GameServerAllocationSpec{Fleet: "reuse"})
	if st := waitAllocation(t, a1); st.GameServerName != gs.Name {
		t.Fatalf("first allocation %+v", st)
	}
	waitState(t, gs, v1alpha1.GameServerStateAllocated, nil)
	if err := lc.Ready(); err != nil {
		t.Fatal(err)
	}
	waitState(t, gs, v1alpha1.GameServerStateReady, nil)
	// An allocation is served once, from the operator's cache: let it show the server Ready.
	waitCached(t, gs, v1alpha1.GameServerStateReady)

	a2 := createAllocation(t, ns, "second", v1alpha1.GameServerAllocationSpec{Fleet: "reuse"})
	if st := waitAllocation(t, a2); st.GameServerName != gs.Name {
		t.Fatalf("the reused server was not allocated again: %+v", st)
	}
	waitState(t, gs, v1alpha1.GameServerStateAllocated, func(g *v1alpha1.GameServer) bool { return g.Status.AllocatedBy == string(a2.UID) })
	if err := lc.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := lc.Ready(); err == nil {
		t.Fatal("Ready after Shutdown was accepted")
	}
	// The fleet replaces the server that shut down.
	waitFor(t, fleetWait, "a replacement server", func() (bool, error) {
		servers := fleetServers(t, f)
		for name, s := range servers {
			if name != gs.Name && s.Status.State == v1alpha1.GameServerStateReady {
				return len(servers) == 1, fmt.Errorf("%d servers", len(servers))
			}
		}
		return false, fmt.Errorf("servers %v", stateOf(servers, v1alpha1.GameServerStateReady))
	})
	old := &v1alpha1.GameServer{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(gs), old); err == nil && old.Status.State != v1alpha1.GameServerStateShutdown {
		t.Fatalf("the old server is %s, want Shutdown or gone", old.Status.State)
	}
}

// TestReserve: a Reserved server is not allocated, shows its deadline, and is Ready again when
// it runs out.
func TestReserve(t *testing.T) {
	ns := newNamespace(t)
	gs := readyServer(t, ns, "held")
	if err := procLifecycle(t, gs).Reserve(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, gs, v1alpha1.GameServerStateReserved, func(g *v1alpha1.GameServer) bool { return g.Status.ReservedUntil != nil })
	if got.Status.ReservedUntil.Before(&metav1.Time{Time: time.Now()}) {
		t.Fatalf("reservedUntil %v is past", got.Status.ReservedUntil)
	}
	st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{})
	if st.State != v1alpha1.AllocationUnAllocated {
		t.Fatalf("a Reserved server was allocated: %+v", st)
	}
	waitState(t, gs, v1alpha1.GameServerStateReady, func(g *v1alpha1.GameServer) bool { return g.Status.ReservedUntil == nil })
}

// TestPlayersAndBackfill: the players and capacity the process reports show in the status; an
// allocation asking for room takes it, a second one backfills the Allocated server, and of
// concurrent requests for more room than is left, exactly as many as fit are allocated.
func TestPlayersAndBackfill(t *testing.T) {
	ns := newNamespace(t)
	gs := readyServer(t, ns, "room")
	lc := procLifecycle(t, gs)
	if err := lc.SetCapacity(10); err != nil {
		t.Fatal(err)
	}
	if err := lc.SetCounter("rounds", 3); err != nil {
		t.Fatal(err)
	}
	lc.SetPlayers(1)
	waitState(t, gs, v1alpha1.GameServerStateReady, func(g *v1alpha1.GameServer) bool {
		p := g.Status.Players
		return p != nil && p.Connected == 1 && p.Capacity == 10 && g.Status.Counters["rounds"] == 3
	})
	// kubectl shows them.
	lines := strings.Split(strings.TrimSpace(kubectl(t, "get", "-n", ns, "gs", "room")), "\n")
	header, row := strings.Fields(lines[0]), strings.Fields(lines[len(lines)-1])
	col := func(name string) string {
		if i := slices.Index(header, name); i >= 0 && i < len(row) {
			return row[i]
		}
		return ""
	}
	if len(lines) != 2 || col("STATE") != "Ready" || col("PLAYERS") != "1" || col("CAPACITY") != "10" {
		t.Errorf("kubectl get gs:\n%s", strings.Join(lines, "\n"))
	}

	st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{PlayerRoom: 4})
	if st.State != v1alpha1.AllocationAllocated || st.GameServerName != gs.Name {
		t.Fatalf("room for 4: %+v", st)
	}
	waitState(t, gs, v1alpha1.GameServerStateAllocated, func(g *v1alpha1.GameServer) bool { return g.Status.Players.Pending == 4 })
	// Two of them connect: the room they held is now theirs.
	lc.SetPlayers(3)
	waitState(t, gs, v1alpha1.GameServerStateAllocated, func(g *v1alpha1.GameServer) bool {
		return g.Status.Players.Connected == 3 && g.Status.Players.Pending == 2
	})
	// 10 - 3 connected - 2 pending = 5 left: of 8 concurrent requests for one player each,
	// exactly 5 backfill the server.
	var wg sync.WaitGroup
	results := make([]v1alpha1.GameServerAllocationStatus, 8)
	for i := range results {
		wg.Go(func() {
			a := createAllocation(t, ns, fmt.Sprintf("fill-%d", i), v1alpha1.GameServerAllocationSpec{PlayerRoom: 1})
			results[i] = waitAllocation(t, a)
		})
	}
	wg.Wait()
	allocated := 0
	for _, r := range results {
		switch {
		case r.State == v1alpha1.AllocationAllocated && r.GameServerName == gs.Name:
			allocated++
		case r.State != v1alpha1.AllocationUnAllocated:
			t.Fatalf("result %+v", r)
		}
	}
	got := getGS(t, gs)
	if allocated != 5 || got.Status.Players.Pending != 7 {
		t.Fatalf("%d backfills (want 5), pending %d (want 7)", allocated, got.Status.Players.Pending)
	}
	// The match ends: the held room is released.
	if err := lc.Ready(); err != nil {
		t.Fatal(err)
	}
	waitState(t, gs, v1alpha1.GameServerStateReady, func(g *v1alpha1.GameServer) bool { return g.Status.Players.Pending == 0 })
}

// TestUnhealthy: a Ready server whose process stops answering becomes Unhealthy and its Fleet
// replaces it; an Allocated one is reported (Healthy False) and kept.
func TestUnhealthy(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "sick", 2)
	f.Spec.Template.Spec.Health = v1alpha1.GameServerHealth{UnhealthyAfterSeconds: 5}
	_, servers := createReadyFleet(t, f)
	st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "sick"})
	allocated := servers[st.GameServerName]
	var ready *v1alpha1.GameServer
	for name, s := range servers {
		if name != st.GameServerName {
			ready = s
		}
	}
	for _, gs := range []*v1alpha1.GameServer{allocated, ready} {
		if err := kube.hang(ctx, client.ObjectKeyFromObject(gs)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, fleetWait, "the silent Ready server replaced", func() (bool, error) {
		got := &v1alpha1.GameServer{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ready), got)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("state %s (%w)", got.Status.State, err)
	})
	got := waitState(t, allocated, v1alpha1.GameServerStateAllocated, func(g *v1alpha1.GameServer) bool {
		c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionHealthy)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	if !eventReasons(t, ns, got.Name)["UnhealthyAllocated"] {
		t.Error("no UnhealthyAllocated event for the kept server")
	}
	waitFleet(t, f, fleetCounts{replicas: 2, ready: 1, allocated: 1, updated: 2})
}

// TestUnhealthyAllocatedReplacedWhenAsked: with spec.health.replaceAllocated an Allocated server
// that stops answering is Unhealthy.
func TestUnhealthyAllocatedReplacedWhenAsked(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "strict", v1alpha1.PortPolicyDynamic, 0)
	gs.Spec.Health = v1alpha1.GameServerHealth{UnhealthyAfterSeconds: 5, ReplaceAllocated: true}
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, gs, v1alpha1.GameServerStateReady)
	waitCached(t, gs, v1alpha1.GameServerStateReady)
	if st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{}); st.GameServerName != gs.Name {
		t.Fatalf("%+v", st)
	}
	if err := kube.hang(ctx, client.ObjectKeyFromObject(gs)); err != nil {
		t.Fatal(err)
	}
	waitState(t, gs, v1alpha1.GameServerStateUnhealthy, nil)
}

// TestAllocationFinishedAfterOperatorStop: an allocation whose server was marked but whose
// delivery failed is finished later, on the same server — by the operator that retries, and by
// a new operator that has none of the old one's memory (it finds the server by its mark): the
// game gets the allocation once, the GameServer its labels, the allocation its result, and no
// second server is taken.
func TestAllocationFinishedAfterOperatorStop(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := readyServer(t, ns, "half")
	spare := readyServer(t, ns, "spare")
	lc := procLifecycle(t, gs)
	var mu sync.Mutex
	busy, events := true, 0
	lc.SetDeliver(func(context.Context, netcode.Allocation) error {
		mu.Lock()
		defer mu.Unlock()
		if busy {
			return errors.New("the game is not taking allocations yet")
		}
		events++
		return nil
	})
	// Only gs can serve it, so a second server taken would show.
	if err := k8s.Patch(ctx, gs, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"half"}}}`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLong, "the label in the operator's cache", func() (bool, error) {
		got := &v1alpha1.GameServer{}
		err := operator.Get(ctx, client.ObjectKeyFromObject(gs), got)
		return err == nil && got.Labels["pool"] == "half", err
	})
	a := createAllocation(t, ns, "m1", v1alpha1.GameServerAllocationSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "half"}},
		Metadata: &v1alpha1.AllocationMetadata{Labels: map[string]string{"match": "m1"}},
		Payload:  "half-done",
	})
	waitState(t, gs, v1alpha1.GameServerStateAllocated, func(g *v1alpha1.GameServer) bool { return g.Status.AllocatedBy == string(a.UID) })
	got := &v1alpha1.GameServerAllocation{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil || got.Status.State != "" {
		t.Fatalf("the result was recorded before the game had it: %+v (%v)", got.Status, err)
	}

	// A new operator, with no memory of the first one's, finishes the allocation. A new operator's
	// cache has listed every GameServer before its first pass, the first one's mark included; the
	// running cache this one shares may still lag the mark the test just read from the API server.
	waitFor(t, waitLong, "the mark in the operator's cache", func() (bool, error) {
		got := &v1alpha1.GameServer{}
		err := operator.Get(ctx, client.ObjectKeyFromObject(gs), got)
		return err == nil && got.Status.AllocatedBy == string(a.UID), err
	})
	mu.Lock()
	busy = false
	mu.Unlock()
	fresh := &AllocationReconciler{Client: operator.Client, alloc: allocator, results: map[types.NamespacedName]servedAllocation{}}
	waitFor(t, waitLong, "the new operator's pass", func() (bool, error) {
		_, err := fresh.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(a)})
		return err == nil, err
	})
	st := waitAllocation(t, a)
	if st.State != v1alpha1.AllocationAllocated || st.GameServerName != gs.Name {
		t.Fatalf("finished as %+v, want %s", st, gs.Name)
	}
	if ls := lc.Status(); ls.LastAllocationUID != string(a.UID) || ls.State != netcode.LifecycleAllocated {
		t.Fatalf("the process after the finish: %+v", ls)
	}
	mu.Lock()
	if events != 1 {
		t.Errorf("the game saw the allocation %d times, want once", events)
	}
	mu.Unlock()
	if got := getGS(t, gs); got.Labels["match"] != "m1" {
		t.Fatalf("labels %v", got.Labels)
	}
	if got := getGS(t, spare); got.Status.State != v1alpha1.GameServerStateReady {
		t.Fatalf("the spare server is %s", got.Status.State)
	}
}
