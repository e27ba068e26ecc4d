package session

import (
	"fmt"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/congestion"
	"github.com/netfleet/netfleet/gameserver/snapshot"
)

// Config is the per-session policy compiled from a resolved netcode config: everything a session
// reads while it runs, in the units it computes with. Build it with NewConfig; the tick loop
// installs a new one on every session at a tick boundary (Session.SetConfig).
type Config struct {
	TickRateHz int
	Congestion congestion.Params

	// BytesPerSecond is the session's byte rate before the congestion throttle scales it; 0 is
	// unlimited. A session may override it (Session.SetBytesPerSecond).
	BytesPerSecond int
	// SnapshotBytesPerTick is the static per-frame snapshot budget; 0 is unlimited.
	SnapshotBytesPerTick int
	// FrameBytes is the largest frame a session may be sent, the capacity of a pooled frame.
	FrameBytes int
	// Snapshot is the full-detail replication config; detail levels derive theirs from it.
	Snapshot snapshot.Config

	CloseStalledAfterMs int64
	LagAllowanceMs      int64
	PushLogTicks        int
	PingTimeoutMs       int64

	IngressBytesPerSecond  int
	IngressWindowMs        int64
	AbuseRefusalsPerWindow int
	AbuseWindows           int

	MaxInboundMessageBytes int
	MaxPendingBytes        int
}

// NewConfig compiles a resolved netcode config. interestRadius is the full-detail interest radius
// in meters, a property of the game rather than of the netcode config; a radius that is not
// positive is refused.
func NewConfig(nc netcode.Resolved, interestRadius float32) (Config, error) {
	d := nc.Config()
	cg := d.Congestion
	c := Config{
		TickRateHz: int(d.TickRateHz),
		Congestion: congestion.MakeParams(congestion.Knobs{
			Enabled:                cg.IsEnabled(),
			TickRateHz:             int(d.TickRateHz),
			MinSendHz:              int(cg.MinSendHz),
			LossThresholdPermille:  int(cg.LossThresholdPermille),
			DelayMarginMs:          int(cg.DelayMarginMs),
			BacklogThresholdBytes:  int(cg.BacklogThresholdBytes),
			IncreaseStepPermille:   int(cg.IncreaseStepPermille),
			DecreaseFactorPermille: int(cg.DecreaseFactorPermille),
			EvalIntervalTicks:      int(cg.EvalIntervalTicks),
			BudgetFloorBytes:       int(*cg.BudgetFloorBytes),
			MinFrameBytes:          netcode.MinSnapshotBytesPerTick,
			LossCeilingPermille:    int(cg.LossCeilingPermille),
			LossTestRatePermille:   int(cg.LossTestRatePermille),
			LossRetestMs:           int(cg.LossRetestMs),
		}),
		BytesPerSecond:         int(*d.Budget.SessionBytesPerSecond),
		SnapshotBytesPerTick:   int(*d.Budget.SnapshotBytesPerTick),
		FrameBytes:             int(d.Backpressure.FrameBytes),
		Snapshot:               snapshot.FromNetcode(nc, interestRadius),
		CloseStalledAfterMs:    int64(d.Backpressure.CloseStalledAfterMs),
		LagAllowanceMs:         int64(d.Backpressure.LagSkipRttAllowanceMs),
		PushLogTicks:           int(d.Backpressure.PushLogTicks),
		PingTimeoutMs:          int64(d.Backpressure.PingTimeoutMs),
		IngressBytesPerSecond:  int(d.Ingress.BytesPerSecond),
		IngressWindowMs:        int64(d.Ingress.WindowMs),
		AbuseRefusalsPerWindow: int(d.Ingress.AbuseRefusalsPerWindow),
		AbuseWindows:           int(d.Ingress.AbuseWindows),
		MaxInboundMessageBytes: int(d.Memory.MaxInboundMessageBytes),
		MaxPendingBytes:        int(d.Memory.MaxPendingBytesPerConnection),
	}
	if err := c.Snapshot.Validate(); err != nil {
		return Config{}, fmt.Errorf("session: replication config: %w", err)
	}
	return c, nil
}
