//go:build linux

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// observer watches one namespace's GameServers and Pods for a whole test, from the test's own
// watch, and records every broken promise it sees:
//
//   - a server's status.netcode.appliedGeneration goes down while its process (instance id) stays
//     the same: config went backwards;
//   - a GameServer ever has two Pods (by UID);
//   - an Allocated server is deleted, or leaves Allocated for anything but Shutdown or Error.
type observer struct {
	mu       sync.Mutex
	applied  map[instanceKey]int64
	podsOf   map[types.UID]map[types.UID]string
	state    map[types.UID]v1alpha1.GameServerState
	problems []string
	updates  int
}

type instanceKey struct {
	server   types.UID
	instance string
}

// observe starts watching ns until the test ends.
func observe(t *testing.T, ns string) *observer {
	t.Helper()
	o := &observer{
		applied: map[instanceKey]int64{},
		podsOf:  map[types.UID]map[types.UID]string{},
		state:   map[types.UID]v1alpha1.GameServerState{},
	}
	c, err := cache.New(env.plane.cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("observer: %v", err)
		}
	})
	for _, h := range []struct {
		obj     client.Object
		onApply func(any)
		onGone  func(any)
	}{
		{&v1alpha1.GameServer{}, o.onServer, o.onServerGone},
		{&corev1.Pod{}, o.onPod, func(any) {}},
	} {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    h.onApply,
			UpdateFunc: func(_, obj any) { h.onApply(obj) },
			DeleteFunc: h.onGone,
		}); err != nil {
			t.Fatal(err)
		}
	}
	go func() { done <- c.Start(ctx) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, waitLimit)
	defer cancelSync()
	if !c.WaitForCacheSync(syncCtx) {
		t.Fatal("observer: watch did not sync")
	}
	return o
}

func (o *observer) problem(format string, args ...any) {
	o.problems = append(o.problems, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (o *observer) onServer(obj any) {
	gs, ok := obj.(*v1alpha1.GameServer)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.updates++
	st := gs.Status
	if st.Netcode.InstanceID != "" {
		k := instanceKey{gs.UID, st.Netcode.InstanceID}
		if prev, seen := o.applied[k]; seen && st.Netcode.AppliedGeneration < prev {
			o.problem("%s: applied generation went back from %d to %d (process %s)", gs.Name, prev, st.Netcode.AppliedGeneration, st.Netcode.InstanceID)
		}
		o.applied[k] = max(o.applied[k], st.Netcode.AppliedGeneration)
	}
	prev := o.state[gs.UID]
	if prev == v1alpha1.GameServerStateAllocated && st.State != prev && !st.State.IsFinal() {
		o.problem("%s left Allocated for %q", gs.Name, st.State)
	}
	o.state[gs.UID] = st.State
}

func (o *observer) onServerGone(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	gs, ok := obj.(*v1alpha1.GameServer)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// The last state this watch saw counts too: a deletion may come without a final update.
	if gs.Status.State == v1alpha1.GameServerStateAllocated || o.state[gs.UID] == v1alpha1.GameServerStateAllocated {
		o.problem("Allocated server %s was deleted", gs.Name)
	}
}

func (o *observer) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "GameServer" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	pods := o.podsOf[ref.UID]
	if pods == nil {
		pods = map[types.UID]string{}
		o.podsOf[ref.UID] = pods
	}
	if _, seen := pods[pod.UID]; !seen && len(pods) > 0 {
		o.problem("GameServer %s has a second Pod (%s, uid %s), after %v", ref.Name, pod.Name, pod.UID, pods)
	}
	pods[pod.UID] = pod.Name
}

// check fails the test for every broken promise seen so far and logs how much was watched.
func (o *observer) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.problems {
		t.Error(p)
	}
	t.Logf("observer: %d GameServer updates of %d servers, %d Pods watched", o.updates, len(o.state), len(o.podsOf))
}
