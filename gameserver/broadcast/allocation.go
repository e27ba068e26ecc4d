package broadcast

import (
	"context"
	"maps"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/game"
)

// deliverAllocation hands an allocation to the game (game.Allocatable) on the tick loop, between
// two ticks, and returns once the game has seen it: the lifecycle's delivery hook.
func (b *Broadcaster) deliverAllocation(ctx context.Context, a netcode.Allocation) error {
	g, ok := b.game.(game.Allocatable)
	if !ok {
		return nil
	}
	ga := game.Allocation{
		Name: a.Name, UID: a.UID, Labels: maps.Clone(a.Labels), Annotations: maps.Clone(a.Annotations),
		Payload: a.Payload, PlayerRoom: int(a.PlayerRoom),
	}
	return b.call(ctx, func() { g.Allocated(ga) })
}
