package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestAllocationServedAgainFromStaleCache: a GameServerAllocation reconciled again right after it
// was served, while the operator's cache still shows it without a result and its server still
// Ready (neither informer has delivered the two writes yet), is answered with the same server,
// not with a second one.
func TestAllocationServedAgainFromStaleCache(t *testing.T) {
	ctx := context.Background()
	server := func(name string) *v1alpha1.GameServer {
		g := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{
			Namespace: "games", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{v1alpha1.LabelFleet: "dust"},
		}}
		g.Status.State = stReady
		return g
	}
	request := &v1alpha1.GameServerAllocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "match", UID: "uid-match"},
		Spec:       v1alpha1.GameServerAllocationSpec{Fleet: "dust"},
	}
	api := fake.NewClientBuilder().WithScheme(testScheme).
		WithObjects(request, server("one"), server("two")).
		WithStatusSubresource(&v1alpha1.GameServer{}, &v1alpha1.GameServerAllocation{}).Build()
	// The operator's view, as it was before the allocation was served.
	key := types.NamespacedName{Namespace: "games", Name: "match"}
	stale := &v1alpha1.GameServerAllocation{}
	if err := api.Get(ctx, key, stale); err != nil {
		t.Fatal(err)
	}
	index := newReadyIndex()
	index.synced = func() bool { return true }
	var servers v1alpha1.GameServerList
	if err := api.List(ctx, &servers); err != nil {
		t.Fatal(err)
	}
	for i := range servers.Items {
		index.OnAdd(&servers.Items[i], true)
	}
	cached := interceptor.NewClient(api, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if a, ok := obj.(*v1alpha1.GameServerAllocation); ok {
				stale.DeepCopyInto(a)
				return nil
			}
			return c.Get(ctx, k, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*v1alpha1.GameServerList); ok {
				return nil // the cache's allocatedBy index has not seen the mark
			}
			return c.List(ctx, list, opts...)
		},
	})
	alloc := &Allocator{index: index, api: api, write: api, claims: map[types.UID]*claim{}}
	r := &AllocationReconciler{Client: cached, alloc: alloc, results: map[types.NamespacedName]servedAllocation{}}
	for range 2 {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	got := &v1alpha1.GameServerAllocation{}
	if err := api.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if err := api.List(ctx, &servers); err != nil {
		t.Fatal(err)
	}
	var allocated []string
	for _, g := range servers.Items {
		if g.Status.State == stAllocated {
			allocated = append(allocated, g.Name)
		}
	}
	if len(allocated) != 1 || got.Status.State != v1alpha1.AllocationAllocated || got.Status.GameServerName != allocated[0] {
		t.Fatalf("servers allocated: %v; the request's result: %s %q", allocated, got.Status.State, got.Status.GameServerName)
	}
}
