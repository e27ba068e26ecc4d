package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// testNoResync is the sync interval of the autoscalers that must react to events: an hour, so a
// test passes only if the watches drive them.
const testNoResync = 3600

// newBufferAutoscaler is a Buffer policy autoscaler for fleet that resyncs only every hour.
func newBufferAutoscaler(ns, name, fleet string, buffer intstr.IntOrString, minReplicas, maxReplicas int32) *v1alpha1.FleetAutoscaler {
	return &v1alpha1.FleetAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.FleetAutoscalerSpec{
			FleetName: fleet,
			Policy: v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyBuffer, Buffer: &v1alpha1.BufferPolicy{
				BufferSize: buffer, MinReplicas: minReplicas, MaxReplicas: maxReplicas,
			}},
			Sync: v1alpha1.FleetAutoscalerSync{Mode: v1alpha1.FleetAutoscalerSyncEvents, IntervalSeconds: testNoResync},
		},
	}
}

func getAutoscaler(t testing.TB, fas *v1alpha1.FleetAutoscaler) *v1alpha1.FleetAutoscaler {
	t.Helper()
	out := &v1alpha1.FleetAutoscaler{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(fas), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// autoscalerWant is what a test expects of an autoscaler's status; an empty field is not
// checked.
type autoscalerWant struct {
	desired, current, allocated int32
	able, ableReason            string // AbleToScale status and reason
	limitReason                 string // ScalingLimited reason
}

// waitAutoscaler waits until the autoscaler's status (of its current generation, for a pass that
// scaled) says want.
func waitAutoscaler(t testing.TB, fas *v1alpha1.FleetAutoscaler, want autoscalerWant) *v1alpha1.FleetAutoscaler {
	t.Helper()
	var got *v1alpha1.FleetAutoscaler
	waitFor(t, fleetWait, fmt.Sprintf("autoscaler %s at %+v", fas.Name, want), func() (bool, error) {
		got = getAutoscaler(t, fas)
		st := got.Status
		able := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAbleToScale)
		limited := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionScalingLimited)
		switch {
		case able == nil || able.ObservedGeneration != got.Generation:
			return false, fmt.Errorf("status %+v", st)
		case want.able != "" && (string(able.Status) != want.able || able.Reason != want.ableReason):
			return false, fmt.Errorf("AbleToScale %+v", able)
		case want.limitReason != "" && (limited == nil || limited.Reason != want.limitReason):
			return false, fmt.Errorf("ScalingLimited %+v", limited)
		case st.DesiredReplicas != want.desired || st.CurrentReplicas != want.current || st.AllocatedReplicas != want.allocated:
			return false, fmt.Errorf("status desired %d current %d allocated %d", st.DesiredReplicas, st.CurrentReplicas, st.AllocatedReplicas)
		case want.able == string(metav1.ConditionTrue) && st.ObservedGeneration != got.Generation:
			return false, fmt.Errorf("observedGeneration %d of %d", st.ObservedGeneration, got.Generation)
		}
		return true, nil
	})
	return got
}

// removalWatch records, from a watch of a namespace's GameServers, every server deleted while it
// was Allocated: a match cut off.
type removalWatch struct {
	mu      sync.Mutex
	removed []string
}

func watchAllocatedRemovals(t *testing.T, ns string) *removalWatch {
	t.Helper()
	c, err := cache.New(restCfg, cache.Options{Scheme: testScheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := c.GetInformer(suiteCtx, &v1alpha1.GameServer{})
	if err != nil {
		t.Fatal(err)
	}
	w := &removalWatch{}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if gs, ok := obj.(*v1alpha1.GameServer); ok && gs.Status.State == v1alpha1.GameServerStateAllocated {
			w.mu.Lock()
			w.removed = append(w.removed, gs.Name)
			w.mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(suiteCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(ctx); err != nil {
			t.Errorf("watch: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("watch did not sync")
	}
	return w
}

func (w *removalWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.removed) > 0 {
		t.Errorf("Allocated servers removed: %v", w.removed)
	}
}

// allocateBurst allocates n servers of the fleet at once through the allocator endpoint and
// returns their names; every one must be Allocated.
func allocateBurst(t *testing.T, ns, fleet string, n int) []string {
	t.Helper()
	names := make([]string, n)
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: fleet})
			if st.State != v1alpha1.AllocationAllocated {
				return fmt.Errorf("allocation %d: %s %s", i, st.Reason, st.Message)
			}
			names[i] = st.GameServerName
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestFleetAutoscalerBufferUnderBursts keeps a buffer of 4 free servers, within [2, 12], while
// bursts of 4 allocations at once eat it, with no periodic resync to help: after each burst the
// fleet grows back to its Allocated servers plus 4 free ones, until maxReplicas caps it
// (ScalingLimited). When the matches end the fleet shrinks back, and no Allocated server is ever
// removed.
func TestFleetAutoscalerBufferUnderBursts(t *testing.T) {
	ns := newNamespace(t)
	removals := watchAllocatedRemovals(t, ns)
	f := newFleet(ns, "buffered", 1)
	createReadyFleet(t, f)
	fas := newBufferAutoscaler(ns, "buffered", "buffered", intstr.FromInt32(4), 2, 12)
	if err := k8s.Create(context.Background(), fas); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, f, fleetCounts{replicas: 4, ready: 4, updated: 4})
	got := waitAutoscaler(t, fas, autoscalerWant{desired: 4, current: 4, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded,
		limitReason: v1alpha1.ReasonWithinLimits})
	if got.Status.LastScaleTime == nil {
		t.Error("no lastScaleTime after scaling 1 -> 4")
	}

	var matches []string
	for round, want := range []int32{8, 12} {
		matches = append(matches, allocateBurst(t, ns, f.Name, 4)...)
		n := int32(len(matches))
		waitFleet(t, f, fleetCounts{replicas: want, ready: want - n, allocated: n, updated: want})
		waitAutoscaler(t, fas, autoscalerWant{desired: want, current: want, allocated: n, able: "True",
			ableReason: v1alpha1.ReasonScalingSucceeded, limitReason: v1alpha1.ReasonWithinLimits})
		t.Logf("burst %d: fleet at %d replicas, %d Allocated", round+1, want, n)
	}
	// The last burst takes every free server; the buffer would want 16, maxReplicas holds 12.
	matches = append(matches, allocateBurst(t, ns, f.Name, 4)...)
	waitFleet(t, f, fleetCounts{replicas: 12, allocated: 12, updated: 12})
	got = waitAutoscaler(t, fas, autoscalerWant{desired: 12, current: 12, allocated: 12, able: "True",
		ableReason: v1alpha1.ReasonScalingSucceeded, limitReason: v1alpha1.ReasonAtMaxReplicas})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionScalingLimited); c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "wants 16") {
		t.Errorf("ScalingLimited %+v", c)
	}

	// Ten matches end: two Allocated stay, and the fleet comes down to them plus the buffer.
	slices.Sort(matches)
	ended, staying := matches[:10], matches[10:]
	for _, name := range ended {
		if err := kube.finish(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, corev1.PodSucceeded); err != nil {
			t.Fatal(err)
		}
	}
	_, servers := waitFleet(t, f, fleetCounts{replicas: 6, ready: 4, allocated: 2, updated: 6})
	if alloc := stateOf(servers, v1alpha1.GameServerStateAllocated); !slices.Equal(alloc, staying) {
		t.Errorf("Allocated %v, want the matches that did not end, %v", alloc, staying)
	}
	waitAutoscaler(t, fas, autoscalerWant{desired: 6, current: 6, allocated: 2, able: "True",
		ableReason: v1alpha1.ReasonScalingSucceeded, limitReason: v1alpha1.ReasonWithinLimits})
	waitFor(t, fleetWait, "scale events", func() (bool, error) {
		r := eventReasons(t, ns, fas.Name)
		return r["ScaledUp"] && r["ScaledDown"], fmt.Errorf("reasons %v", r)
	})
	removals.check(t)
}

// TestFleetAutoscalerPercentAndLimits: a 50% buffer within [3, 6] brings a fleet of 7 down to
// minReplicas, follows its allocations, stops at maxReplicas, and puts the fleet back when it is
// scaled by hand (the fleet's edit triggers it).
func TestFleetAutoscalerPercentAndLimits(t *testing.T) {
	ns := newNamespace(t)
	removals := watchAllocatedRemovals(t, ns)
	f := newFleet(ns, "pct", 7)
	createReadyFleet(t, f)
	fas := newBufferAutoscaler(ns, "pct", "pct", intstr.FromString("50%"), 3, 6)
	if err := k8s.Create(context.Background(), fas); err != nil {
		t.Fatal(err)
	}
	// Idle, 50% wants one free server; minReplicas holds 3.
	waitFleet(t, f, fleetCounts{replicas: 3, ready: 3, updated: 3})
	waitAutoscaler(t, fas, autoscalerWant{desired: 3, current: 3, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded,
		limitReason: v1alpha1.ReasonAtMinReplicas})

	allocateBurst(t, ns, f.Name, 2)
	waitFleet(t, f, fleetCounts{replicas: 4, ready: 2, allocated: 2, updated: 4})
	waitAutoscaler(t, fas, autoscalerWant{desired: 4, current: 4, allocated: 2, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded,
		limitReason: v1alpha1.ReasonWithinLimits})

	// Four Allocated want 8; maxReplicas holds 6.
	allocateBurst(t, ns, f.Name, 2)
	waitFleet(t, f, fleetCounts{replicas: 6, ready: 2, allocated: 4, updated: 6})
	waitAutoscaler(t, fas, autoscalerWant{desired: 6, current: 6, allocated: 4, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded,
		limitReason: v1alpha1.ReasonAtMaxReplicas})

	// Scaled by hand, the fleet is put back to what its autoscaler decides.
	editFleet(t, f, func(f *v1alpha1.Fleet) { f.Spec.Replicas = 10 })
	waitFor(t, fleetWait, "the autoscaler to put the fleet back to 6", func() (bool, error) {
		got := getFleet(t, f)
		return got.Spec.Replicas == 6 && got.Generation > 4, fmt.Errorf("spec.replicas %d at generation %d", got.Spec.Replicas, got.Generation)
	})
	waitFleet(t, f, fleetCounts{replicas: 6, ready: 2, allocated: 4, updated: 6})
	removals.check(t)
}

// TestFleetAutoscalerOwnership: an autoscaler whose fleet does not exist says so and scales the
// fleet once it is created; a second autoscaler naming the same fleet does nothing while the
// first exists, and takes over when it is deleted. An autoscaler in Interval mode scales too.
func TestFleetAutoscalerOwnership(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	first := newBufferAutoscaler(ns, "first", "late", intstr.FromInt32(2), 0, 10)
	if err := k8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitAutoscaler(t, first, autoscalerWant{able: "False", ableReason: v1alpha1.ReasonFleetNotFound})
	waitFor(t, fleetWait, "the FleetNotFound event", func() (bool, error) {
		r := eventReasons(t, ns, first.Name)
		return r[v1alpha1.ReasonFleetNotFound], fmt.Errorf("reasons %v", r)
	})

	f := newFleet(ns, "late", 1)
	if err := k8s.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, f, fleetCounts{replicas: 2, ready: 2, updated: 2})
	waitAutoscaler(t, first, autoscalerWant{desired: 2, current: 2, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded})

	// Creation times have a resolution of a second: the second autoscaler is created a second
	// later, so that the first is the older.
	waitFor(t, fleetWait, "a new second", func() (bool, error) {
		return metav1.Now().Unix() > getAutoscaler(t, first).CreationTimestamp.Unix(), nil
	})
	second := newBufferAutoscaler(ns, "second", "late", intstr.FromInt32(5), 0, 10)
	second.Spec.Sync = v1alpha1.FleetAutoscalerSync{Mode: v1alpha1.FleetAutoscalerSyncInterval, IntervalSeconds: 1}
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	got := waitAutoscaler(t, second, autoscalerWant{able: "False", ableReason: v1alpha1.ReasonFleetHasOtherAutoscaler})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAbleToScale); !strings.Contains(c.Message, "first") {
		t.Errorf("AbleToScale %+v does not name the autoscaler that scales the fleet", c)
	}
	if r := getFleet(t, f); r.Spec.Replicas != 2 {
		t.Errorf("the fleet's replicas %d, want the first autoscaler's 2", r.Spec.Replicas)
	}

	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, f, fleetCounts{replicas: 5, ready: 5, updated: 5})
	waitAutoscaler(t, second, autoscalerWant{desired: 5, current: 5, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded})
	// Interval mode follows the fleet's allocations at its interval.
	allocateBurst(t, ns, f.Name, 2)
	waitFleet(t, f, fleetCounts{replicas: 7, ready: 5, allocated: 2, updated: 7})

	// The fleet's deletion is seen.
	if err := k8s.Delete(ctx, f); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fleetWait, "the fleet gone", func() (bool, error) {
		c := meta.FindStatusCondition(getAutoscaler(t, second).Status.Conditions, v1alpha1.ConditionAbleToScale)
		return c != nil && (c.Reason == v1alpha1.ReasonFleetNotFound || c.Reason == v1alpha1.ReasonFleetDeleting), fmt.Errorf("AbleToScale %+v", c)
	})
}

// TestFleetAutoscalerPrinterColumns reads `kubectl get fas`.
func TestFleetAutoscalerPrinterColumns(t *testing.T) {
	ns := newNamespace(t)
	f := newFleet(ns, "shown", 1)
	createReadyFleet(t, f)
	fas := newBufferAutoscaler(ns, "shown", "shown", intstr.FromInt32(2), 0, 5)
	if err := k8s.Create(context.Background(), fas); err != nil {
		t.Fatal(err)
	}
	waitAutoscaler(t, fas, autoscalerWant{desired: 2, current: 2, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded})
	table := kubectl(t, "get", "-n", ns, "fas", "-o", "wide")
	for _, want := range []string{"FLEET", "POLICY", "CURRENT", "DESIRED", "ALLOCATED", "ABLE", "LIMITED", "REASON", "LAST SCALE",
		"shown", "Buffer", "True", "False", v1alpha1.ReasonScalingSucceeded} {
		if !strings.Contains(table, want) {
			t.Errorf("kubectl get fas: no %q in\n%s", want, table)
		}
	}
}

// editAutoscaler changes an autoscaler's spec, retrying when the operator wrote its status
// meanwhile.
func editAutoscaler(t testing.TB, fas *v1alpha1.FleetAutoscaler, edit func(*v1alpha1.FleetAutoscaler)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		g := getAutoscaler(t, fas)
		edit(g)
		return k8s.Update(context.Background(), g)
	})
	if err != nil {
		t.Fatal(err)
	}
}
