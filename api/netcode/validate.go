package netcode

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Default returns a copy of c with every absent field set to its default. Default is idempotent
// and never changes a field that is set.
func (c NetcodeConfig) Default() NetcodeConfig {
	d := c.DeepCopy()
	def32 := func(v *int32, def int32) {
		if *v == 0 {
			*v = def
		}
	}
	def64 := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	defPtr := func(v **int32, def int32) {
		if *v == nil {
			*v = &def
		}
	}
	defBool := func(v **bool, def bool) {
		if *v == nil {
			*v = &def
		}
	}
	def32(&d.TickRateHz, DefaultTickRateHz)

	cg := &d.Congestion
	defBool(&cg.Enabled, true)
	def32(&cg.MinSendHz, DefaultCongestionMinSendHz)
	def32(&cg.LossThresholdPermille, DefaultCongestionLossThresholdPermille)
	defPtr(&cg.BudgetFloorBytes, DefaultCongestionBudgetFloorBytes)
	def32(&cg.DelayMarginMs, DefaultCongestionDelayMarginMs)
	def32(&cg.BacklogThresholdBytes, DefaultCongestionBacklogThresholdBytes)
	def32(&cg.IncreaseStepPermille, DefaultCongestionIncreaseStepPermille)
	def32(&cg.DecreaseFactorPermille, DefaultCongestionDecreaseFactorPermille)
	def32(&cg.EvalIntervalTicks, DefaultCongestionEvalIntervalTicks)
	def32(&cg.LossCeilingPermille, DefaultCongestionLossCeilingPermille)
	def32(&cg.LossTestRatePermille, DefaultCongestionLossTestRatePermille)
	def32(&cg.LossRetestMs, DefaultCongestionLossRetestMs)

	b := &d.Budget
	defPtr(&b.SessionBytesPerSecond, DefaultBudgetSessionBytesPerSecond)
	defPtr(&b.SnapshotBytesPerTick, DefaultBudgetSnapshotBytesPerTick)
	def32(&b.MaxPacketBytes, DefaultBudgetMaxPacketBytes)

	bp := &d.Backpressure
	def32(&bp.CloseStalledAfterMs, DefaultBackpressureCloseStalledAfterMs)
	def32(&bp.LagSkipRttAllowanceMs, DefaultBackpressureLagSkipRttAllowanceMs)
	def32(&bp.FrameBytes, DefaultBackpressureFrameBytes)
	def32(&bp.PushLogTicks, DefaultBackpressurePushLogTicks)
	def32(&bp.PingTimeoutMs, DefaultBackpressurePingTimeoutMs)

	in := &d.Ingress
	def32(&in.BytesPerSecond, DefaultIngressBytesPerSecond)
	def32(&in.WindowMs, DefaultIngressWindowMs)
	def32(&in.AbuseRefusalsPerWindow, DefaultIngressAbuseRefusalsPerWindow)
	def32(&in.AbuseWindows, DefaultIngressAbuseWindows)
	def32(&in.ConnectsPerSecondPerHost, DefaultIngressConnectsPerSecondPerHost)
	def32(&in.ConnectBurstPerHost, DefaultIngressConnectBurstPerHost)

	m := &d.Memory
	def64(&m.FramePoolBudgetBytes, DefaultMemoryFramePoolBudgetBytes)
	def64(&m.StatePoolBudgetBytes, DefaultMemoryStatePoolBudgetBytes)
	def64(&m.IngressPoolBudgetBytes, DefaultMemoryIngressPoolBudgetBytes)
	def32(&m.MaxInboundMessageBytes, DefaultMemoryMaxInboundMessageBytes)
	def32(&m.MaxPendingBytesPerConnection, DefaultMemoryMaxPendingBytesPerConnection)
	def32(&m.MaxParkedBytesPerConnection, DefaultMemoryMaxParkedBytesPerConnection)

	defBool(&d.Observability.PerPeerMetrics, true)

	ct := &d.ConnectTokens
	ct.Mode = ct.ModeOrDefault()
	def32(&ct.TTLSeconds, DefaultConnectTokensTTLSeconds)
	return *d
}

// FieldError is one refused field of a NetcodeConfig. Field is the field's JSON path relative to
// the config, e.g. "congestion.minSendHz".
type FieldError struct {
	Field  string
	Detail string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// ValidationError lists every refused field of a config; the config is refused whole.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i := range e.Fields {
		parts[i] = e.Fields[i].Error()
	}
	return "invalid netcode config: " + strings.Join(parts, "; ")
}

// fieldBound is the range of one field of a defaulted config: its JSON path, its bounds and how to
// read it.
type fieldBound struct {
	field    string
	min, max int64
	get      func(d *NetcodeConfig) int64
}

// Validate checks a config with the rules the CRD's OpenAPI bounds and CEL rules enforce. It
// validates the defaulted config, so an absent field is judged by its default. It returns nil or
// a *ValidationError naming every refused field. The game server takes configs through Resolve,
// which validates with it.
func (c NetcodeConfig) Validate() error {
	d := c.Default()
	var errs []FieldError
	rng := func(field string, v, lo, hi int64) {
		if v < lo || v > hi {
			errs = append(errs, FieldError{field, fmt.Sprintf("must be in [%d, %d], got %d", lo, hi, v)})
		}
	}
	rule := func(ok bool, field, detail string) {
		if !ok {
			errs = append(errs, FieldError{field, detail})
		}
	}

	// Every field's range, as its kubebuilder marker states it (zz_generated.bounds.go).
	for i := range fieldBounds {
		b := &fieldBounds[i]
		rng(b.field, b.get(&d), b.min, b.max)
	}
	// The rules between fields, as the CRD's CEL rules state them.
	cg, b, bp, in, m := d.Congestion, d.Budget, d.Backpressure, d.Ingress, d.Memory
	rule(cg.MinSendHz <= d.TickRateHz, "congestion.minSendHz", "congestion.minSendHz must not exceed tickRateHz")
	rule(cg.LossCeilingPermille >= cg.LossThresholdPermille, "congestion.lossCeilingPermille",
		"congestion.lossCeilingPermille must not be below lossThresholdPermille")
	rule(*b.SnapshotBytesPerTick == 0 || *b.SnapshotBytesPerTick >= MinSnapshotBytesPerTick, "budget.snapshotBytesPerTick",
		"budget.snapshotBytesPerTick must be 0 (unlimited) or at least 64, one header and one record")
	rule(*b.SessionBytesPerSecond == 0 || *b.SessionBytesPerSecond >= b.MaxPacketBytes, "budget.sessionBytesPerSecond",
		"budget.sessionBytesPerSecond must be 0 (unlimited) or at least budget.maxPacketBytes, or a full packet could never be sent")
	rule(bp.FrameBytes >= b.MaxPacketBytes, "backpressure.frameBytes",
		"backpressure.frameBytes must hold at least one packet of budget.maxPacketBytes")
	rule(m.FramePoolBudgetBytes >= 2*int64(bp.FrameBytes), "memory.framePoolBudgetBytes",
		"memory.framePoolBudgetBytes must hold one session's two frame slots (2 * backpressure.frameBytes)")
	rule(in.BytesPerSecond >= m.MaxInboundMessageBytes, "ingress.bytesPerSecond",
		"ingress.bytesPerSecond must admit at least one message of memory.maxInboundMessageBytes per second")
	rule(m.MaxPendingBytesPerConnection >= m.MaxInboundMessageBytes, "memory.maxPendingBytesPerConnection",
		"memory.maxPendingBytesPerConnection must hold one message of memory.maxInboundMessageBytes")
	rule(int64(m.MaxParkedBytesPerConnection) >= 2*int64(m.MaxInboundMessageBytes), "memory.maxParkedBytesPerConnection",
		"memory.maxParkedBytesPerConnection must hold two messages of memory.maxInboundMessageBytes")

	switch d.ConnectTokens.Mode {
	case ConnectTokensDisabled, ConnectTokensOptional, ConnectTokensRequired:
	default:
		errs = append(errs, FieldError{"connectTokens.mode",
			fmt.Sprintf("must be Disabled, Optional or Required, got %q", d.ConnectTokens.Mode)})
	}

	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

// FirstField returns the field named by the first FieldError in err, or "" if err is not a
// *ValidationError.
func FirstField(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) && len(ve.Fields) > 0 {
		return ve.Fields[0].Field
	}
	return ""
}

// Hash is a short, stable digest of the defaulted config: two configs that mean the same thing
// hash the same, whichever defaults were spelled out.
func (c NetcodeConfig) Hash() string {
	raw, err := json.Marshal(c.Default())
	if err != nil {
		// A struct of integers, booleans and strings always marshals.
		panic(fmt.Sprintf("netcode: marshal config: %v", err))
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// PerPeerMetricsEnabled reports whether per-peer series are exported (default true).
func (o ObservabilityConfig) PerPeerMetricsEnabled() bool {
	return o.PerPeerMetrics == nil || *o.PerPeerMetrics
}

// IsEnabled reports whether the congestion controller is on (default true).
func (c CongestionConfig) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// FieldRange returns the range of a ranged field, by its JSON path (e.g.
// "connectTokens.ttlSeconds"), as its kubebuilder markers state it; ok is false for a field
// without one.
func FieldRange(field string) (lo, hi int64, ok bool) {
	for i := range fieldBounds {
		if fieldBounds[i].field == field {
			return fieldBounds[i].min, fieldBounds[i].max, true
		}
	}
	return 0, 0, false
}
