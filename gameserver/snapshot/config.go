package snapshot

import (
	"errors"
	"fmt"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Config is a session's replication settings. A tick loop may change it between ticks with
// SetConfig.
type Config struct {
	// MaxPacketBytes is the largest SNAPSHOT packet (the MTU budget.maxPacketBytes).
	MaxPacketBytes int
	// TickRateHz is the server's tick rate.
	TickRateHz int
	// StateUpdateHz is the rate of state updates (deltas); spawns and despawns go out every
	// tick. 0 means every tick.
	StateUpdateHz int
	// InterestRadius is the distance from the session's focus within which entities are
	// replicated, in meters.
	InterestRadius float32
}

// FromNetcode returns the Config a netcode configuration implies, with the given interest radius.
func FromNetcode(nc netcode.NetcodeConfig, interestRadius float32) Config {
	d := nc.Default()
	return Config{
		MaxPacketBytes: int(d.Budget.MaxPacketBytes),
		TickRateHz:     int(d.TickRateHz),
		StateUpdateHz:  int(d.Budget.StateUpdateHz),
		InterestRadius: interestRadius,
	}
}

// minPacketBytes is the smallest MaxPacketBytes: room for the header and one spawn record.
const minPacketBytes = protocol.MinSnapshotBytes + (protocol.MaxSpawnBits+7)/8

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
	return errors.Join(errs...)
}

// updateInterval is the number of ticks between state updates.
func (c Config) updateInterval() uint32 {
	if c.StateUpdateHz == 0 {
		return 1
	}
	return uint32(max(1, (c.TickRateHz+c.StateUpdateHz/2)/c.StateUpdateHz))
}
