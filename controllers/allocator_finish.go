package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// The writes of an allocation besides the choice of a server: the mark, its undo, and the
// finish — metadata and delivery to the game — that comes before the result is handed out.

// Finish completes an allocation that marked the server gsName: it adds the allocation's labels
// and annotations to the GameServer and delivers the allocation to the server's process, which
// answers once the game has seen it. Only then may the result be handed out: a player given the
// address finds a game that knows its match. Finish is idempotent.
func (a *Allocator) Finish(ctx context.Context, ns string, spec v1alpha1.GameServerAllocationSpec, name string, by types.UID, gsName string) error {
	gs := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gsName}}
	if md := spec.Metadata; md != nil && (len(md.Labels) > 0 || len(md.Annotations) > 0) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": md.Labels, "annotations": md.Annotations}})
		if err != nil {
			return fmt.Errorf("encode allocation metadata: %w", err)
		}
		if err := a.write.Patch(ctx, gs, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("apply allocation metadata to gameserver %s: %w", gsName, err)
		}
	} else if err := a.api.Get(ctx, client.ObjectKeyFromObject(gs), gs); err != nil {
		return fmt.Errorf("read gameserver %s: %w", gsName, err)
	}
	if a.deliver == nil {
		return nil
	}
	al := netcode.Allocation{Name: name, UID: string(by), Payload: spec.Payload, PlayerRoom: spec.Room()}
	if md := spec.Metadata; md != nil {
		al.Labels, al.Annotations = md.Labels, md.Annotations
	}
	if err := a.deliver.DeliverAllocation(ctx, gs, al); err != nil {
		return fmt.Errorf("deliver the allocation to gameserver %s: %w", gsName, err)
	}
	return nil
}

// DeliverWith makes the Allocator deliver allocations to the servers' processes through d. Call
// it before the manager starts.
func (a *Allocator) DeliverWith(d AllocationDeliverer) { a.deliver = d }

// AllocationDeliverer delivers an allocation to the process of a GameServer and returns once the
// game has seen it (the GameServer reconciler, which holds the admin API's client and token).
type AllocationDeliverer interface {
	DeliverAllocation(ctx context.Context, gs *v1alpha1.GameServer, a netcode.Allocation) error
}

// validateAllocationSpec checks what the CRD checks of an allocation's metadata and payload, for
// requests of the allocator endpoint, which the API server never sees.
func validateAllocationSpec(spec v1alpha1.GameServerAllocationSpec) error {
	if err := validatePlayers(spec.Players); err != nil {
		return err
	}
	al := netcode.Allocation{UID: "-", Payload: spec.Payload, PlayerRoom: spec.PlayerRoom}
	if md := spec.Metadata; md != nil {
		al.Labels, al.Annotations = md.Labels, md.Annotations
	}
	err := netcode.ValidateAllocation(al)
	if ve, ok := errors.AsType[*netcode.ValidationError](err); ok {
		f := ve.Fields[0]
		field := "spec." + f.Field
		if f.Field == "labels" || f.Field == "annotations" {
			field = "spec.metadata." + f.Field
		}
		return fmt.Errorf("%s: %s", field, f.Detail)
	}
	return err
}

// maxAllocationPlayers and maxPlayerIDBytes are the CRD's bounds of spec.players.
const (
	maxAllocationPlayers = 256
	maxPlayerIDBytes     = connecttoken.MaxPlayerIDBytes
)

// validatePlayers checks spec.players as the CRD does: at most maxAllocationPlayers ids of 1 to
// maxPlayerIDBytes bytes, none named twice.
func validatePlayers(players []string) error {
	if len(players) > maxAllocationPlayers {
		return fmt.Errorf("spec.players: %d players, at most %d", len(players), maxAllocationPlayers)
	}
	seen := make(map[string]bool, len(players))
	for i, p := range players {
		switch {
		case len(p) == 0 || len(p) > maxPlayerIDBytes:
			return fmt.Errorf("spec.players[%d]: a player id is 1 to %d bytes, got %d", i, maxPlayerIDBytes, len(p))
		case seen[p]:
			return fmt.Errorf("spec.players[%d]: %q is named twice", i, p)
		}
		seen[p] = true
	}
	return nil
}

// markPatch is the status patch that marks gs, as read, Allocated by by, holding room for room
// more players.
func markPatch(gs *v1alpha1.GameServer, room int32, by types.UID, now time.Time) ([]byte, error) {
	st := map[string]any{"state": v1alpha1.GameServerStateAllocated, "allocatedBy": by}
	if room > 0 {
		p := v1alpha1.GameServerPlayers{}
		if gs.Status.Players != nil {
			p = *gs.Status.Players
		}
		until := metav1.NewTime(now.Add(pendingRoomTTL))
		st["players"] = map[string]any{"pending": p.Pending + room, "pendingUntil": until}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": gs.ResourceVersion}, "status": st})
	if err != nil {
		return nil, fmt.Errorf("encode allocation mark: %w", err)
	}
	return patch, nil
}

// undo returns the undo of the mark that turned before into after: the state, mark and held room
// go back to what they were, unless the server changed since.
func (a *Allocator) undo(before, after *v1alpha1.GameServer, room int32) undoFunc {
	return func(ctx context.Context) error {
		st := map[string]any{"state": before.Status.State, "allocatedBy": before.Status.AllocatedBy}
		if room > 0 {
			pending := int32(0)
			if after.Status.Players != nil {
				pending = max(0, after.Status.Players.Pending-room)
			}
			st["players"] = map[string]any{"pending": pending}
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": after.ResourceVersion}, "status": st})
		if err != nil {
			return fmt.Errorf("encode allocation undo: %w", err)
		}
		out := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: after.Namespace, Name: after.Name}}
		if err := a.write.Status().Patch(ctx, out, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("undo the allocation of gameserver %s: %w", after.Name, err)
		}
		return nil
	}
}
