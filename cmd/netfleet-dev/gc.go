package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gcInterval is how often the Pod collector looks for orphans.
const gcInterval = time.Second

// podCollector stands in for the garbage collector of kube-controller-manager, which the local
// control plane does not run: it deletes a Pod once all of its owners are gone (background
// cascading deletion), so that deleting a GameServer stops its Pod's processes. Pods are the only
// dependents it handles, and foreground or orphan cascading is not modeled: owners are deleted
// with the default, background propagation.
type podCollector struct {
	c   client.Client
	log logr.Logger
}

func (g *podCollector) run(ctx context.Context) {
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := g.sweep(ctx); err != nil && ctx.Err() == nil {
			g.log.Error(err, "collect orphaned pods")
		}
	}
}

// ownerKey names one owner as a Pod's reference does.
type ownerKey struct {
	apiVersion, kind, namespace, name string
	uid                               types.UID
}

// sweep deletes every Pod whose owners are all gone.
func (g *podCollector) sweep(ctx context.Context) error {
	pods := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	if err := g.c.List(ctx, pods); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	exists := map[ownerKey]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if len(pod.OwnerReferences) == 0 || pod.DeletionTimestamp != nil {
			continue
		}
		orphan := true
		for _, ref := range pod.OwnerReferences {
			k := ownerKey{ref.APIVersion, ref.Kind, pod.Namespace, ref.Name, ref.UID}
			present, seen := exists[k]
			if !seen {
				var err error
				if present, err = g.ownerExists(ctx, k); err != nil {
					return err
				}
				exists[k] = present
			}
			if present {
				orphan = false
				break
			}
		}
		if !orphan {
			continue
		}
		uid := pod.UID
		del := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
		err := g.c.Delete(ctx, del, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete orphaned pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		g.log.Info("deleted pod whose owners are gone", "pod", pod.Namespace+"/"+pod.Name)
	}
	return nil
}

// ownerExists reports whether the owner is there with the referenced UID. An owner of a kind the
// API server does not serve is taken to exist, as the garbage collector leaves such Pods alone.
// (The client drops the namespace when the owner's kind is cluster-scoped.)
func (g *podCollector) ownerExists(ctx context.Context, k ownerKey) (bool, error) {
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: k.apiVersion, Kind: k.kind}}
	key := client.ObjectKey{Namespace: k.namespace, Name: k.name}
	err := g.c.Get(ctx, key, obj)
	if meta.IsNoMatchError(err) {
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get owner %s %s: %w", k.kind, key, err)
	}
	return obj.UID == k.uid, nil
}
