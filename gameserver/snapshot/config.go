package snapshot

import (
	"errors"
	"fmt"
	"math"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Config is a view's replication settings. A tick loop may change it between ticks with
// SetConfig.
type Config struct {
	// MaxPacketBytes is the largest SNAPSHOT packet (the MTU budget.maxPacketBytes).
	MaxPacketBytes int
	// TickRateHz is the server's tick rate.
	TickRateHz int
	// StateUpdateHz is the rate of state updates (deltas); spawns and despawns go out every
	// tick. 0 means every tick.
	StateUpdateHz int
	// InterestRadius is the distance from the view's focus within which entities are
	// replicated, in meters.
	InterestRadius float32
	// FarRadius splits the interest area into a near disc and the far band beyond it, in
	// meters. 0 means no far band.
	FarRadius float32
	// FarUpdateHz is the rate of state updates of entities in the far band; 0 means the rate of
	// StateUpdateHz. Spawns and despawns in the far band still go out every tick.
	FarUpdateHz int
	// EnterBudgetDivisor limits the spawn records of a frame to 1/EnterBudgetDivisor of the
	// frame's budget, so entities entering the view cannot crowd the updates of those already in
	// it out of a short budget; one spawn per frame always fits, and a spawn left out goes in a
	// later frame. 0 or 1 means no limit.
	EnterBudgetDivisor int
}

// FromNetcode returns the Config a resolved netcode configuration implies, with the given
// interest radius.
func FromNetcode(nc netcode.Resolved, interestRadius float32) Config {
	d := nc.Config()
	return Config{
		MaxPacketBytes: int(d.Budget.MaxPacketBytes),
		TickRateHz:     int(d.TickRateHz),
		StateUpdateHz:  int(d.Budget.StateUpdateHz),
		InterestRadius: interestRadius,
	}
}

// minPacketBytes is the smallest MaxPacketBytes: room for the header with its input
// acknowledgement and one spawn record of any schema.
const minPacketBytes = protocol.MinSnapshotBytes + protocol.InputAckBytes + (protocol.MaxSpawnBits+7)/8

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxPacketBytes < minPacketBytes || c.MaxPacketBytes > 65535 {
		errs = append(errs, fmt.Errorf("snapshot: MaxPacketBytes %d not in [%d, 65535]", c.MaxPacketBytes, minPacketBytes))
	}
	if c.TickRateHz <= 0 {
		errs = append(errs, fmt.Errorf("snapshot: TickRateHz %d must be positive", c.TickRateHz))
	}
	if c.StateUpdateHz < 0 || c.StateUpdateHz > c.TickRateHz {
		errs = append(errs, fmt.Errorf("snapshot: StateUpdateHz %d not in [0, TickRateHz %d]", c.StateUpdateHz, c.TickRateHz))
	}
	if !(c.InterestRadius > 0) {
		errs = append(errs, fmt.Errorf("snapshot: InterestRadius %v must be positive", c.InterestRadius))
	}
	if !(c.FarRadius >= 0 && c.FarRadius <= c.InterestRadius) {
		errs = append(errs, fmt.Errorf("snapshot: FarRadius %v not in [0, InterestRadius %v]", c.FarRadius, c.InterestRadius))
	}
	if state := c.StateRateHz(); c.FarUpdateHz < 0 || c.FarUpdateHz > state {
		errs = append(errs, fmt.Errorf("snapshot: FarUpdateHz %d not in [0, the state update rate %d]", c.FarUpdateHz, state))
	}
	if c.EnterBudgetDivisor < 0 || c.EnterBudgetDivisor > maxEnterBudgetDivisor {
		errs = append(errs, fmt.Errorf("snapshot: EnterBudgetDivisor %d not in [0, %d]", c.EnterBudgetDivisor, maxEnterBudgetDivisor))
	}
	return errors.Join(errs...)
}

// maxEnterBudgetDivisor is the largest EnterBudgetDivisor.
const maxEnterBudgetDivisor = 64

// StateRateHz is the rate of state updates: StateUpdateHz, or the tick rate when that is 0.
func (c Config) StateRateHz() int {
	if c.StateUpdateHz == 0 {
		return c.TickRateHz
	}
	return c.StateUpdateHz
}

// updateInterval is the number of ticks between state updates.
func (c Config) updateInterval() uint32 { return intervalTicks(c.TickRateHz, c.StateRateHz()) }

// farInterval is the number of ticks between state updates of the far band: never fewer than
// between state updates.
func (c Config) farInterval() uint32 {
	if c.FarUpdateHz == 0 {
		return c.updateInterval()
	}
	return max(c.updateInterval(), intervalTicks(c.TickRateHz, c.FarUpdateHz))
}

func intervalTicks(tickHz, hz int) uint32 {
	if hz <= 0 || hz >= tickHz {
		return 1
	}
	return uint32(max(1, (tickHz+hz/2)/hz))
}

// maxSpawns is how many spawn records of spawnBytes bytes at most a frame of limit bytes may
// carry.
func (c Config) maxSpawns(limit, spawnBytes int) int {
	if c.EnterBudgetDivisor <= 1 {
		return math.MaxInt
	}
	return max(1, limit/c.EnterBudgetDivisor/spawnBytes)
}
