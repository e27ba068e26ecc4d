//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestOperatorKilledMidRollout SIGKILLs the operator process in the middle of a rollout (a Fleet
// template and netcode edit, with two servers Allocated), starts a new one, makes another netcode
// edit and SIGKILLs that operator while it pushes it. The rollout converges on the last spec; the
// Allocated servers keep their GameServer, Pod and process and run the last netcode; no
// GameServer ever has two Pods; no server's applied generation goes back (the test's own watch
// sees every status write of the run).
func TestOperatorKilledMidRollout(t *testing.T) {
	ensureOperator(t)
	ns := newNamespace(t, "rollout")
	obs := observe(t, ns)
	const fleet, replicas = "arena", 6
	createFleet(t, ns, fleet, replicas)
	before := byName(waitConverged(t, ns, fleet))
	matches := []string{allocate(t, ns, fleet), allocate(t, ns, fleet)}
	began := time.Now()

	// One update that rolls Pods (a new world seed) and changes netcode in place.
	updateFleet(t, ns, fleet, func(f *v1alpha1.Fleet) {
		c := &f.Spec.Template.Spec.Template.Spec.Containers[0]
		c.Args = append(c.Args, "--world-seed=2")
		f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 12
	})
	waitFor(t, "the rollout under way", waitLimit, func() (bool, error) {
		servers, err := fleetServers(context.Background(), ns, fleet)
		if err != nil {
			return false, err
		}
		rolled := 0
		for _, s := range servers {
			if slices.Contains(s.gs.Spec.Template.Spec.Containers[0].Args, "--world-seed=2") {
				rolled++
			}
		}
		return rolled >= 1 && rolled < replicas-len(matches), fmt.Errorf("%d servers of the new template", rolled)
	})
	if err := env.operator.kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("operator killed %s into the rollout", time.Since(began).Round(time.Millisecond))
	// The Pods keep starting meanwhile; the next operator finds them half-way.
	time.Sleep(time.Second)
	if err := env.operator.start(); err != nil {
		t.Fatal(err)
	}

	// A netcode edit for the new operator, killed while it pushes it.
	f := updateFleet(t, ns, fleet, func(f *v1alpha1.Fleet) { f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 14 })
	waitFor(t, "the second edit reaching a server", waitLimit, func() (bool, error) {
		servers, err := fleetServers(context.Background(), ns, fleet)
		if err != nil {
			return false, err
		}
		for _, s := range servers {
			if s.gs.Spec.Netcode.Congestion.MinSendHz == 14 {
				return true, nil
			}
		}
		return false, fmt.Errorf("no server of fleet generation %d yet", f.Generation)
	})
	if err := env.operator.kill(); err != nil {
		t.Fatal(err)
	}
	if err := env.operator.start(); err != nil {
		t.Fatal(err)
	}

	servers := waitConverged(t, ns, fleet)
	t.Logf("rollout converged %s after the first edit", time.Since(began).Round(time.Millisecond))
	updated := 0
	for _, s := range servers {
		if s.gs.Spec.Netcode.Congestion.MinSendHz != 14 {
			t.Errorf("%s runs minSendHz %d, want 14", s.gs.Name, s.gs.Spec.Netcode.Congestion.MinSendHz)
		}
		if slices.Contains(s.gs.Spec.Template.Spec.Containers[0].Args, "--world-seed=2") {
			updated++
		}
	}
	// The Allocated servers are the same objects, Pods and processes, and run the last netcode.
	now := byName(servers)
	for _, name := range matches {
		old, cur := before[name], now[name]
		switch {
		case cur.gs.UID == "":
			t.Errorf("Allocated server %s is gone", name)
		case cur.gs.UID != old.gs.UID || cur.pod.UID != old.pod.UID:
			t.Errorf("Allocated server %s was replaced (uid %s -> %s, pod %s -> %s)", name, old.gs.UID, cur.gs.UID, old.pod.UID, cur.pod.UID)
		case cur.gs.Status.State != v1alpha1.GameServerStateAllocated:
			t.Errorf("Allocated server %s is %q", name, cur.gs.Status.State)
		case cur.gs.Status.Netcode.InstanceID != old.gs.Status.Netcode.InstanceID:
			t.Errorf("Allocated server %s runs a new process (%s -> %s)", name, old.gs.Status.Netcode.InstanceID, cur.gs.Status.Netcode.InstanceID)
		}
	}
	if want := replicas - len(matches); updated != want {
		t.Errorf("%d servers of the new template, want %d (the Allocated ones keep the old one)", updated, want)
	}
	final := &v1alpha1.Fleet{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: fleet}, final); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(final.Status.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Reason != "WaitingForAllocated" {
		t.Errorf("Progressing condition %+v, want reason WaitingForAllocated", c)
	}
	obs.check(t)
}
