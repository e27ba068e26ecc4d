//go:build linux

package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// collector stands in for kube-controller-manager's garbage collector, which the test control
// plane does not run, for the two kinds of dependents netfleet makes: it deletes a GameServer
// whose controlling Fleet is gone and a Pod whose controlling GameServer is gone (background
// propagation), so that a rollout's removed servers stop their processes as in a cluster.
type collector struct {
	c   client.Client
	log logr.Logger
}

func (g *collector) run(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Errors are expected while the API server restarts; the next sweep tries again.
		if err := g.sweep(ctx); err != nil && ctx.Err() == nil {
			g.log.V(1).Info("sweep failed", "error", err.Error())
		}
	}
}

func (g *collector) sweep(ctx context.Context) error {
	// Dependents are listed before their owners, so every owner of a listed dependent was
	// created before the owners' list was taken.
	var pods corev1.PodList
	if err := g.c.List(ctx, &pods, client.HasLabels{v1alpha1.LabelGameServer}); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var servers v1alpha1.GameServerList
	if err := g.c.List(ctx, &servers); err != nil {
		return fmt.Errorf("list gameservers: %w", err)
	}
	var fleets v1alpha1.FleetList
	if err := g.c.List(ctx, &fleets); err != nil {
		return fmt.Errorf("list fleets: %w", err)
	}
	live := map[types.UID]bool{}
	for i := range fleets.Items {
		live[fleets.Items[i].UID] = true
	}
	for i := range servers.Items {
		gs := &servers.Items[i]
		if err := g.collect(ctx, gs, live, "Fleet"); err != nil {
			return err
		}
	}
	live = map[types.UID]bool{}
	for i := range servers.Items {
		if servers.Items[i].DeletionTimestamp == nil {
			live[servers.Items[i].UID] = true
		}
	}
	for i := range pods.Items {
		if err := g.collect(ctx, &pods.Items[i], live, "GameServer"); err != nil {
			return err
		}
	}
	return nil
}

// collect deletes obj if its controller is of kind and not among live.
func (g *collector) collect(ctx context.Context, obj client.Object, live map[types.UID]bool, kind string) error {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != kind || live[ref.UID] || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := obj.GetUID()
	err := g.c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s/%s, whose %s is gone: %w", obj.GetNamespace(), obj.GetName(), kind, err)
	}
	g.log.Info("deleted an object whose owner is gone", "object", obj.GetNamespace()+"/"+obj.GetName(), "owner", kind+"/"+ref.Name)
	return nil
}
