package netcode

// Defaults. Every field of NetcodeConfig documents its default; these constants are the single
// source for Default and for the kubebuilder default markers' values.
const (
	DefaultTickRateHz = 60

	DefaultCongestionMinSendHz              = 10
	DefaultCongestionLossThresholdPermille  = 20
	DefaultCongestionBudgetFloorBytes       = 400
	DefaultCongestionDelayMarginMs          = 40
	DefaultCongestionBacklogThresholdBytes  = 32768
	DefaultCongestionIncreaseStepPermille   = 50
	DefaultCongestionDecreaseFactorPermille = 700
	DefaultCongestionEvalIntervalTicks      = 6
	DefaultCongestionLossCeilingPermille    = 150
	DefaultCongestionLossTestRatePermille   = 800
	DefaultCongestionLossRetestMs           = 20000

	DefaultBudgetSessionBytesPerSecond = 163840
	DefaultBudgetSnapshotBytesPerTick  = 2400
	DefaultBudgetMaxPacketBytes        = 1200

	DefaultBackpressureCloseStalledAfterMs    = 3000
	DefaultBackpressureLagSkipRttAllowanceMs  = 250
	DefaultBackpressureFrameBytes             = 262144
	DefaultBackpressurePushLogTicks           = 8
	DefaultBackpressurePingTimeoutMs          = 2000
	DefaultIngressBytesPerSecond              = 16384
	DefaultIngressWindowMs                    = 1000
	DefaultIngressAbuseRefusalsPerWindow      = 64
	DefaultIngressAbuseWindows                = 3
	DefaultIngressConnectsPerSecondPerHost    = 10
	DefaultIngressConnectBurstPerHost         = 20
	DefaultMemoryFramePoolBudgetBytes         = 256 << 20
	DefaultMemoryStatePoolBudgetBytes         = 256 << 20
	DefaultMemoryIngressPoolBudgetBytes       = 64 << 20
	DefaultMemoryMaxInboundMessageBytes       = 1024
	DefaultMemoryMaxPendingBytesPerConnection = 16384
	DefaultMemoryMaxParkedBytesPerConnection  = 262144
	DefaultConnectTokensTTLSeconds            = 30

	// MinSnapshotBytesPerTick is the smallest non-zero snapshot budget: one packet header and one
	// entity record. A smaller budget could never carry anything.
	MinSnapshotBytesPerTick = 64
)

// NetcodeConfig is the complete netcode configuration of one game server. The operator pushes it
// to running servers as live config; the server applies it atomically between two ticks.
//
// Units are in the field names; ratios are per mille (1000 = 1.0). A zero or absent field takes
// its default (Default), except where the field says that zero has a meaning of its own.
//
// The defaults are applied by the operator and the game server, not stored by the API server: an
// object holds only the fields its author set. That keeps every GameServer small — each write and
// watch event of a large fleet costs the API server in proportion to the object's size — and lets
// a newer netfleet's defaults reach the servers that leave a field out. The config a server runs,
// defaults filled in, is what its admin API's GET returns, and its hash is in
// status.netcode.appliedHash.
//
// The CEL rules read an absent field as its default, as Default does.
//
// +kubebuilder:validation:XValidation:rule="!has(self.congestion) || !has(self.congestion.minSendHz) || self.congestion.minSendHz <= (has(self.tickRateHz) ? self.tickRateHz : 60)",message="congestion.minSendHz must not exceed tickRateHz",fieldPath=".congestion.minSendHz"
// +kubebuilder:validation:XValidation:rule="(has(self.congestion) && has(self.congestion.lossCeilingPermille) ? self.congestion.lossCeilingPermille : 150) >= (has(self.congestion) && has(self.congestion.lossThresholdPermille) ? self.congestion.lossThresholdPermille : 20)",message="congestion.lossCeilingPermille must not be below lossThresholdPermille",fieldPath=".congestion.lossCeilingPermille"
// +kubebuilder:validation:XValidation:rule="(has(self.backpressure) && has(self.backpressure.frameBytes) ? self.backpressure.frameBytes : 262144) >= (has(self.budget) && has(self.budget.maxPacketBytes) ? self.budget.maxPacketBytes : 1200)",message="backpressure.frameBytes must hold at least one packet of budget.maxPacketBytes",fieldPath=".backpressure.frameBytes"
// +kubebuilder:validation:XValidation:rule="!has(self.budget) || !has(self.budget.sessionBytesPerSecond) || self.budget.sessionBytesPerSecond == 0 || self.budget.sessionBytesPerSecond >= (has(self.budget.maxPacketBytes) ? self.budget.maxPacketBytes : 1200)",message="budget.sessionBytesPerSecond must be 0 (unlimited) or at least budget.maxPacketBytes, or a full packet could never be sent",fieldPath=".budget.sessionBytesPerSecond"
// +kubebuilder:validation:XValidation:rule="(has(self.memory) && has(self.memory.framePoolBudgetBytes) ? self.memory.framePoolBudgetBytes : 268435456) >= 2 * (has(self.backpressure) && has(self.backpressure.frameBytes) ? self.backpressure.frameBytes : 262144)",message="memory.framePoolBudgetBytes must hold one session's two frame slots (2 * backpressure.frameBytes)",fieldPath=".memory.framePoolBudgetBytes"
// +kubebuilder:validation:XValidation:rule="(has(self.ingress) && has(self.ingress.bytesPerSecond) ? self.ingress.bytesPerSecond : 16384) >= (has(self.memory) && has(self.memory.maxInboundMessageBytes) ? self.memory.maxInboundMessageBytes : 1024)",message="ingress.bytesPerSecond must admit at least one message of memory.maxInboundMessageBytes per second",fieldPath=".ingress.bytesPerSecond"
type NetcodeConfig struct {
	// TickRateHz is the simulation and broadcast rate, in ticks per second.
	// Default 60, range [10, 120].
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=120
	TickRateHz int32 `json:"tickRateHz,omitempty"`

	// Congestion is the per-peer congestion response: the AIMD throttle, and the bottleneck
	// ceiling on a link that queues.
	// +optional
	Congestion CongestionConfig `json:"congestion,omitzero"`

	// Budget holds the per-session byte budgets and the packet size.
	// +optional
	Budget BudgetConfig `json:"budget,omitzero"`

	// Backpressure holds the limits that keep a slow session from costing anyone else.
	// +optional
	Backpressure BackpressureConfig `json:"backpressure,omitzero"`

	// Ingress holds the limits on what clients may send.
	// +optional
	Ingress IngressConfig `json:"ingress,omitzero"`

	// Memory holds the memory ceilings of the server's pools and of each connection.
	// +optional
	Memory MemoryConfig `json:"memory,omitzero"`

	// Observability controls what the server exports.
	// +optional
	Observability ObservabilityConfig `json:"observability,omitzero"`

	// ConnectTokens controls whether a client must present a connect token, issued at allocation,
	// to join (docs/connect-tokens.md).
	// +optional
	ConnectTokens ConnectTokensConfig `json:"connectTokens,omitzero"`
}

// ConnectTokenMode is whether a server checks connect tokens.
// +kubebuilder:validation:Enum=Disabled;Optional;Required
type ConnectTokenMode string

const (
	// ConnectTokensDisabled: tokens are not checked; anyone who reaches the port may join.
	ConnectTokensDisabled ConnectTokenMode = "Disabled"
	// ConnectTokensOptional: a client may join without a token; one that presents a token must
	// present a valid one, and its player id is handed to the game.
	ConnectTokensOptional ConnectTokenMode = "Optional"
	// ConnectTokensRequired: only a client with a valid token joins.
	ConnectTokensRequired ConnectTokenMode = "Required"
)

// ConnectTokensConfig configures connect tokens: short-lived tokens, signed by the operator at
// allocation, that bind a player id to one server and one allocation.
type ConnectTokensConfig struct {
	// Mode is Disabled, Optional or Required. Default Disabled. A server runs a mode other than
	// Disabled only once it holds its fleet's signing keys, which the operator delivers first.
	// +optional
	Mode ConnectTokenMode `json:"mode,omitempty"`

	// TTLSeconds is how long a token is valid to connect with, in seconds from its issue at
	// allocation; a session that joined in time lasts as long as it stays connected.
	// Default 30, range [5, 3600].
	// +optional
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=3600
	TTLSeconds int32 `json:"ttlSeconds,omitempty"`
}

// ModeOrDefault is the mode, Disabled when unset.
func (c ConnectTokensConfig) ModeOrDefault() ConnectTokenMode {
	if c.Mode == "" {
		return ConnectTokensDisabled
	}
	return c.Mode
}

// CongestionConfig configures the per-peer AIMD controller: one throttle in [floor, 1] per peer,
// stepped every EvalIntervalTicks from the peer's loss, RTT rise and reliable backlog, steering
// the peer's send rate and its per-tick snapshot budget. Where a peer's acknowledgements show a
// queue building at a bottleneck, the controller also holds the peer's bytes under the
// bottleneck's measured rate (the peer's ceiling in the admin API and the peer metrics).
//
// Loss backs a peer off only when it is congestion: when it comes with a queue (the round trip
// over its baseline, or a path that delivers slower than it is sent to), when sending the peer
// less lowered it (the controller tests this by holding the peer under a ceiling for a moment),
// or when it is over LossCeilingPermille. Random loss, such as a radio link's, does not.
type CongestionConfig struct {
	// Enabled is the master switch. false pins every peer to the full tick rate and the full
	// budget, byte for byte what a server without the controller sends. Default true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// MinSendHz is the lowest send rate a congested peer is backed off to, in snapshots per
	// second. It sets the throttle floor (MinSendHz / TickRateHz). Default 10, range [1, 120],
	// at most tickRateHz.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=120
	MinSendHz int32 `json:"minSendHz,omitempty"`

	// LossThresholdPermille is the application-level snapshot loss, in per mille, above which a
	// peer's loss counts: as congestion if it comes with a queue or falls when the peer is sent
	// less, and else as random loss, which does not back the peer off. Default 20 (2%), range
	// [1, 1000].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	LossThresholdPermille int32 `json:"lossThresholdPermille,omitempty"`

	// BudgetFloorBytes is the smallest per-tick snapshot budget the throttle may scale a set
	// budget down to, in bytes; a budget already below it is never raised. 0 means no floor.
	// Default 400, range [0, 65535].
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	BudgetFloorBytes *int32 `json:"budgetFloorBytes,omitempty"`

	// DelayMarginMs is how far, in milliseconds, a peer's RTT may rise over its running-minimum
	// baseline before the peer counts as delayed. A rise that holds level for three evaluations
	// while the peer is sent less is a longer path, and the baseline steps up to it; a rise that
	// falls or grows is a queue, and the peer is backed off while it lasts. Default 40, range
	// [1, 10000].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	DelayMarginMs int32 `json:"delayMarginMs,omitempty"`

	// BacklogThresholdBytes is the reliable data in flight, in bytes, above which a peer counts as
	// congested. Default 32768, range [1024, 16777216].
	// +optional
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=16777216
	BacklogThresholdBytes int32 `json:"backlogThresholdBytes,omitempty"`

	// IncreaseStepPermille is the additive increase of the throttle per healthy evaluation, in
	// per mille. Default 50 (0.05), range [1, 1000].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	IncreaseStepPermille int32 `json:"increaseStepPermille,omitempty"`

	// DecreaseFactorPermille is the multiplicative decrease of the throttle per congested
	// evaluation, in per mille. Default 700 (0.7: one back-off roughly halves the bytes per
	// second, since rate and size both scale), range [100, 990].
	// +optional
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=990
	DecreaseFactorPermille int32 `json:"decreaseFactorPermille,omitempty"`

	// EvalIntervalTicks is how many ticks the throttle is held between two evaluations (the
	// controller's hysteresis). Default 6, range [1, 600].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600
	EvalIntervalTicks int32 `json:"evalIntervalTicks,omitempty"`

	// LossCeilingPermille is the snapshot loss, in per mille over about the last two seconds, above
	// which a peer is backed off whatever the loss's cause. Default 150 (15%), range [1, 1000],
	// at least lossThresholdPermille.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	LossCeilingPermille int32 `json:"lossCeilingPermille,omitempty"`

	// LossTestRatePermille is the share, in per mille, of its recent send rate that a peer is
	// held to while the controller tests whether its loss falls when it is sent less (for about
	// a second, when loss over lossThresholdPermille comes with no queue). Default 800, range
	// [500, 950].
	// +optional
	// +kubebuilder:validation:Minimum=500
	// +kubebuilder:validation:Maximum=950
	LossTestRatePermille int32 `json:"lossTestRatePermille,omitempty"`

	// LossRetestMs is how long, in milliseconds, loss found not to fall when the peer is sent
	// less is taken as random before it is tested again, while it goes on. Default 20000,
	// range [1000, 600000].
	// +optional
	// +kubebuilder:validation:Minimum=1000
	// +kubebuilder:validation:Maximum=600000
	LossRetestMs int32 `json:"lossRetestMs,omitempty"`
}

// BudgetConfig configures how many bytes each session may be sent.
type BudgetConfig struct {
	// SessionBytesPerSecond is each session's byte rate, in bytes per second, shared by its
	// reliable and unreliable traffic and scaled by its congestion throttle. 0 means unlimited.
	// Default 163840, range 0 or [budget.maxPacketBytes, 1073741824].
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1073741824
	SessionBytesPerSecond *int32 `json:"sessionBytesPerSecond,omitempty"`

	// SnapshotBytesPerTick is the static per-tick snapshot budget of a session, in bytes, before
	// the congestion throttle scales it. 0 means unlimited (only the rate lever applies).
	// Default 2400, range 0 or [64, 16777216].
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16777216
	// +kubebuilder:validation:XValidation:rule="self == 0 || self >= 64",message="budget.snapshotBytesPerTick must be 0 (unlimited) or at least 64, one header and one record"
	SnapshotBytesPerTick *int32 `json:"snapshotBytesPerTick,omitempty"`

	// MaxPacketBytes is the largest snapshot packet payload, in bytes; every packet fits it and
	// applies on its own. It must stay under the path MTU minus IP, UDP and ENet headers.
	// Default 1200, range [256, 1380].
	// +optional
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=1380
	MaxPacketBytes int32 `json:"maxPacketBytes,omitempty"`

	// StateUpdateHz is the declared rate of entity state updates, in updates per second; spawns
	// and despawns are still sent every tick. 0 means every tick. Default 0, range [0, 120].
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=120
	StateUpdateHz int32 `json:"stateUpdateHz,omitempty"`
}

// BackpressureConfig configures skip-never-queue: what happens when a session cannot keep up.
type BackpressureConfig struct {
	// CloseStalledAfterMs is how long, in milliseconds, a session may keep being skipped before
	// it is closed with code 1013. Default 3000, range [100, 600000].
	// +optional
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=600000
	CloseStalledAfterMs int32 `json:"closeStalledAfterMs,omitempty"`

	// LagSkipRttAllowanceMs is how far, in milliseconds beyond its RTT, a session's last applied
	// tick (reported in PING) may trail before the session is skipped. Default 250,
	// range [1, 60000].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60000
	LagSkipRttAllowanceMs int32 `json:"lagSkipRttAllowanceMs,omitempty"`

	// FrameBytes is the largest frame (all packets of one tick) a session may be sent, in bytes.
	// Default 262144, range [256, 16777216], at least budget.maxPacketBytes.
	// +optional
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=16777216
	FrameBytes int32 `json:"frameBytes,omitempty"`

	// PushLogTicks is how many ticks of changes are kept to replay to a skipped session; past it
	// the session gets a RESET. Default 8, range [1, 256].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	PushLogTicks int32 `json:"pushLogTicks,omitempty"`

	// PingTimeoutMs is how long, in milliseconds, a session may go without a PING before it is
	// closed with code 4001. Default 2000, range [500, 600000].
	// +optional
	// +kubebuilder:validation:Minimum=500
	// +kubebuilder:validation:Maximum=600000
	PingTimeoutMs int32 `json:"pingTimeoutMs,omitempty"`
}

// IngressConfig configures the limits on client-to-server traffic and connection attempts.
type IngressConfig struct {
	// BytesPerSecond is each session's inbound COMMAND budget, in bytes per second; a COMMAND over
	// budget is refused whole. Default 16384, range [64, 16777216], at least
	// memory.maxInboundMessageBytes.
	// +optional
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=16777216
	BytesPerSecond int32 `json:"bytesPerSecond,omitempty"`

	// WindowMs is the length of one abuse-accounting window, in milliseconds. Default 1000,
	// range [100, 60000].
	// +optional
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=60000
	WindowMs int32 `json:"windowMs,omitempty"`

	// AbuseRefusalsPerWindow is how many refused COMMANDs in one window mark the window abusive.
	// Default 64, range [1, 1000000].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	AbuseRefusalsPerWindow int32 `json:"abuseRefusalsPerWindow,omitempty"`

	// AbuseWindows is how many adjacent abusive windows close the session with code 1008.
	// Default 3, range [1, 100].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	AbuseWindows int32 `json:"abuseWindows,omitempty"`

	// ConnectsPerSecondPerHost is the sustained rate of new connections accepted from one source
	// address, in connections per second (a token bucket); attempts over it are refused and
	// counted. Default 10, range [1, 100000].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	ConnectsPerSecondPerHost int32 `json:"connectsPerSecondPerHost,omitempty"`

	// ConnectBurstPerHost is the token bucket's depth: how many connections one source address
	// may open at once. Default 20, range [1, 100000].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	ConnectBurstPerHost int32 `json:"connectBurstPerHost,omitempty"`
}

// MemoryConfig configures the memory ceilings. What one peer can make the server hold on receive
// is at most maxPendingBytesPerConnection + maxParkedBytesPerConnection of payload.
type MemoryConfig struct {
	// FramePoolBudgetBytes is the ceiling of the pool that outgoing frames live in, in bytes; an
	// exhausted pool skips sessions (they catch up later) and never allocates. Default 268435456
	// (256 MiB), range [65536, 17179869184], at least 2 * backpressure.frameBytes.
	// +optional
	// +kubebuilder:validation:Minimum=65536
	// +kubebuilder:validation:Maximum=17179869184
	FramePoolBudgetBytes int64 `json:"framePoolBudgetBytes,omitempty"`

	// StatePoolBudgetBytes is the ceiling of the pool holding per-session, per-entity replication
	// state, in bytes. Default 268435456 (256 MiB), range [65536, 17179869184].
	// +optional
	// +kubebuilder:validation:Minimum=65536
	// +kubebuilder:validation:Maximum=17179869184
	StatePoolBudgetBytes int64 `json:"statePoolBudgetBytes,omitempty"`

	// IngressPoolBudgetBytes is the ceiling of all sessions' inbound queues together, in bytes.
	// Default 67108864 (64 MiB), range [65536, 17179869184].
	// +optional
	// +kubebuilder:validation:Minimum=65536
	// +kubebuilder:validation:Maximum=17179869184
	IngressPoolBudgetBytes int64 `json:"ingressPoolBudgetBytes,omitempty"`

	// MaxInboundMessageBytes is the largest message a client may send, in bytes (ENet's
	// maximumPacketSize); a larger one is refused by the transport. Default 1024,
	// range [64, 65536].
	// +optional
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=65536
	MaxInboundMessageBytes int32 `json:"maxInboundMessageBytes,omitempty"`

	// MaxPendingBytesPerConnection is the ceiling of one session's inbox of received, not yet
	// processed messages, in bytes. Default 16384, range [64, 16777216], at least
	// maxInboundMessageBytes.
	// +optional
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=16777216
	MaxPendingBytesPerConnection int32 `json:"maxPendingBytesPerConnection,omitempty"`

	// MaxParkedBytesPerConnection is the ceiling of data the transport may hold for one peer while
	// reassembling or reordering (ENet's maximumWaitingData), in bytes. Default 262144,
	// range [128, 67108864], at least 2 * maxInboundMessageBytes.
	// +optional
	// +kubebuilder:validation:Minimum=128
	// +kubebuilder:validation:Maximum=67108864
	MaxParkedBytesPerConnection int32 `json:"maxParkedBytesPerConnection,omitempty"`
}

// ObservabilityConfig controls the server's metrics.
type ObservabilityConfig struct {
	// PerPeerMetrics exports per-peer series (label peer = a bounded slot index). Turn it off for
	// large fleets: per-server histograms of peer rate, loss and RTT are always exported.
	// Default true.
	// +optional
	PerPeerMetrics *bool `json:"perPeerMetrics,omitempty"`
}
