//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestFleetAutoscalerKeepsBuffer runs a Fleet of real game-server processes under a
// FleetAutoscaler that keeps 2 servers free, with no resync for an hour, so only its watches can
// drive it. As matches are allocated, two at a time, the fleet grows to keep 2 servers Ready
// beside them; as matches end — the game-server process exits, as a game's does when its match
// is over, and the Pod (restartPolicy Never) ends — it shrinks back to the remaining matches
// plus 2. No Allocated server is ever removed, and the processes of the matches that go on keep
// running (the observer sees every server's state and Pods).
func TestFleetAutoscalerKeepsBuffer(t *testing.T) {
	ensureOperator(t)
	ctx := context.Background()
	ns := newNamespace(t, "autoscale")
	obs := observe(t, ns)
	const fleet, buffer = "arena", 2
	f := newFleet(ns, fleet, 1, randomPort(40000, 10000))
	f.Spec.Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if err := env.k8s.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	fas := &v1alpha1.FleetAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleet},
		Spec: v1alpha1.FleetAutoscalerSpec{
			FleetName: fleet,
			Policy: v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyBuffer, Buffer: &v1alpha1.BufferPolicy{
				BufferSize: intstr.FromInt32(buffer), MinReplicas: 1, MaxReplicas: 10,
			}},
			Sync: v1alpha1.FleetAutoscalerSync{Mode: v1alpha1.FleetAutoscalerSyncEvents, IntervalSeconds: 3600},
		},
	}
	if err := env.k8s.Create(ctx, fas); err != nil {
		t.Fatal(err)
	}
	waitBuffer(t, ns, fleet, nil, buffer)

	var matches []string
	for range 3 {
		matches = append(matches, allocate(t, ns, fleet), allocate(t, ns, fleet))
		waitBuffer(t, ns, fleet, matches, buffer)
	}
	t.Logf("%d matches, fleet at %d", len(matches), len(matches)+buffer)

	// Three matches end: their processes exit.
	slices.Sort(matches)
	servers := byName(mustServers(t, ns, fleet))
	for _, name := range matches[:3] {
		s := servers[name]
		pid, err := s.pid()
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatalf("end the match on %s: %v", name, err)
		}
	}
	staying := matches[3:]
	waitBuffer(t, ns, fleet, staying, buffer)
	for _, name := range staying {
		s := byName(mustServers(t, ns, fleet))[name]
		if s.pod.UID != servers[name].pod.UID || s.pod.Status.ContainerStatuses[0].ContainerID != servers[name].pod.Status.ContainerStatuses[0].ContainerID {
			t.Errorf("match on %s: its Pod or process changed", name)
		}
	}
	obs.check(t)
}

// waitBuffer waits until the fleet has exactly the given matches Allocated and buffer more
// servers, every one Ready and running its config, and its autoscaler says it scaled it there.
func waitBuffer(t *testing.T, ns, fleet string, matches []string, buffer int) {
	t.Helper()
	want := int32(len(matches) + buffer)
	waitFor(t, fmt.Sprintf("fleet %s at %d matches and %d free", fleet, len(matches), buffer), waitLimit, func() (bool, error) {
		f := &v1alpha1.Fleet{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: fleet}, f); err != nil {
			return false, err
		}
		if f.Spec.Replicas != want {
			return false, fmt.Errorf("spec.replicas %d, want %d", f.Spec.Replicas, want)
		}
		fas := &v1alpha1.FleetAutoscaler{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: fleet}, fas); err != nil {
			return false, err
		}
		able := meta.FindStatusCondition(fas.Status.Conditions, v1alpha1.ConditionAbleToScale)
		if fas.Status.DesiredReplicas != want || able == nil || able.Status != metav1.ConditionTrue {
			return false, fmt.Errorf("autoscaler status %+v", fas.Status)
		}
		return true, nil
	})
	servers := waitConverged(t, ns, fleet)
	var allocated []string
	for _, s := range servers {
		if s.gs.Status.State == v1alpha1.GameServerStateAllocated {
			allocated = append(allocated, s.gs.Name)
		}
	}
	slices.Sort(allocated)
	if wantAlloc := slices.Sorted(slices.Values(matches)); !slices.Equal(allocated, wantAlloc) {
		t.Fatalf("Allocated %v, want %v", allocated, wantAlloc)
	}
}
