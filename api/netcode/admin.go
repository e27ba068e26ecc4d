package netcode

// The game server's admin API (operator -> game server), served over HTTP on its own port.
const (
	// PathNetcode: PUT a ConfigPush, GET the ConfigStatus.
	PathNetcode = "/v1/netcode"
	// PathPeers: GET a PeersResponse.
	PathPeers = "/v1/peers"
	// PathConnectKeys: PUT a ConnectKeysPush, GET the ConnectKeysStatus.
	PathConnectKeys = "/v1/connect-keys"
	// PathHealthz, PathReadyz and PathMetrics are the liveness, readiness and Prometheus endpoints.
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"

	// DefaultAdminPort is the admin API's TCP port in a game-server pod.
	DefaultAdminPort = 8080
	// DefaultGamePort is the game's UDP port in a game-server pod.
	DefaultGamePort = 7777

	// EnvAdminToken carries the admin bearer token into the game-server process. The operator
	// sets it from a Secret reference, never as a literal value.
	EnvAdminToken = "NETFLEET_ADMIN_TOKEN"
	// EnvAdminPort, EnvGamePort and EnvBindAddress tell the game server where to listen.
	EnvAdminPort   = "NETFLEET_ADMIN_PORT"
	EnvGamePort    = "NETFLEET_GAME_PORT"
	EnvBindAddress = "NETFLEET_BIND_ADDRESS"
	// EnvInitialConfig optionally holds a JSON NetcodeConfig the server starts with (generation 0).
	EnvInitialConfig = "NETFLEET_NETCODE_CONFIG"

	// MaxAdminBodyBytes bounds a request body of the admin API.
	MaxAdminBodyBytes = 64 << 10
)

// ConnectKeysPush is the body of PUT /v1/connect-keys: the keys a server checks connect tokens
// with, and the address tokens must name. The operator keeps a fleet's keys in a Secret and pushes
// them to each of its servers before it pushes a config whose connectTokens.mode needs them.
type ConnectKeysPush struct {
	// Keys are the fleet's keys: the signing key first and, during a rotation, the key it
	// replaced. 1 or 2 keys, of distinct ids.
	Keys []ConnectKey `json:"keys"`
	// Server is the address and port players connect to, "address:port" (the GameServer's
	// status.address and status.port): the server a token must name.
	Server string `json:"server"`
}

// ConnectKey is one connect-token signing key. Its JSON form is also what a fleet's Secret holds.
type ConnectKey struct {
	// ID tells the keys of a rotation apart; a token names the id of its key.
	ID uint32 `json:"id"`
	// Secret is the 32-byte HMAC-SHA256 key (base64 in JSON).
	Secret []byte `json:"secret"`
}

// ConnectKeysStatus is the answer to GET and PUT /v1/connect-keys: the ids of the keys the server
// holds, the signing key's first, and the address tokens must name. It never holds a secret.
type ConnectKeysStatus struct {
	KeyIDs []uint32 `json:"keyIds"`
	Server string   `json:"server,omitempty"`
}

// ConfigPush is the body of PUT /v1/netcode.
type ConfigPush struct {
	// Generation is the desired generation (the GameServer's metadata.generation). A push whose
	// generation is older than the one running is refused with 409.
	Generation int64 `json:"generation"`
	// Config is the desired config; absent fields take their defaults.
	Config NetcodeConfig `json:"config"`
}

// ConfigStatus is the answer to GET and to a successful PUT of /v1/netcode.
type ConfigStatus struct {
	// Generation is the generation of the config now running (0 before the first push).
	Generation int64 `json:"generation"`
	// Hash is Config.Hash() of the running config.
	Hash string `json:"hash"`
	// InstanceID identifies the process; it changes when the process restarts.
	InstanceID string `json:"instanceID"`
	// Config is the running config, defaulted.
	Config NetcodeConfig `json:"config"`
}

// ErrorResponse is the body of every 4xx/5xx answer of the admin API.
type ErrorResponse struct {
	Error string `json:"error"`
	// Field names the refused config field, for 422.
	Field string `json:"field,omitempty"`
	// Generation is the running generation, for 409.
	Generation int64 `json:"generation,omitempty"`
}

// PeerInfo is one connected peer as the admin API reports it. Peers are named by slot index,
// never by address or player id.
type PeerInfo struct {
	Slot int `json:"slot"`
	// SendRateHz is the snapshot send rate over the last second.
	SendRateHz float64 `json:"sendRateHz"`
	// LossRatio is the application-level snapshot loss estimate (0..1); EnetLossRatio is ENet's own
	// reliable-retransmission loss (0..1).
	LossRatio     float64 `json:"lossRatio"`
	EnetLossRatio float64 `json:"enetLossRatio"`
	RTTMillis     float64 `json:"rttMillis"`
	// BaselineRTTMillis is the running minimum of RTTMillis that the congestion controller
	// measures delay against; it rises slowly when the path gets longer, and not while the peer
	// shows loss.
	BaselineRTTMillis float64 `json:"baselineRttMillis"`
	// Throttle is the congestion throttle in [floor, 1].
	Throttle float64 `json:"throttle"`
	// CongestedBy names what the congestion controller's last evaluation found, joined by "+":
	// "loss" (snapshot loss over the threshold), "delay" (the round trip over its baseline plus
	// the margin), "backlog" (reliable data in flight over the threshold); empty when none.
	CongestedBy      string `json:"congestedBy,omitempty"`
	BytesSent        uint64 `json:"bytesSent"`
	FrameBudgetBytes int    `json:"frameBudgetBytes"`
	// PacingRateBytesPerSec is the byte rate the peer's sends are paced at:
	// budget.sessionBytesPerSecond scaled by the throttle, held under the bottleneck ceiling; 0 is
	// unlimited.
	PacingRateBytesPerSec float64 `json:"pacingRateBytesPerSec"`
	// CeilingBytesPerSec is the bottleneck ceiling the congestion controller holds for the peer:
	// about what its path delivered when a queue built on it; 0 when the path has shown none.
	CeilingBytesPerSec float64 `json:"ceilingBytesPerSec"`
	// RateClass is 1, 2 or 4: the session is served every RateClass-th tick.
	RateClass int `json:"rateClass"`
	// State is "healthy", "degraded" (backed off or rate-classed) or "stalled".
	State string `json:"state"`
}

// PeersResponse is the answer to GET /v1/peers.
type PeersResponse struct {
	Tick  uint64     `json:"tick"`
	Peers []PeerInfo `json:"peers"`
}
