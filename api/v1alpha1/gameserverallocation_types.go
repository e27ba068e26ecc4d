package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The record of an allocation requested with an Idempotency-Key is a GameServerAllocation named
// after the key: IdempotencyRecordPrefix and the first 16 bytes of the key's SHA-256 in hex. It
// carries the hash in LabelIdempotencyKey, the key itself in AnnotationIdempotencyKey, and the
// SHA-256 of the request's spec as JSON in AnnotationIdempotencyRequest.
const (
	IdempotencyRecordPrefix      = "idempotency-"
	LabelIdempotencyKey          = "netfleet.io/idempotency-key-sha256"
	AnnotationIdempotencyKey     = "netfleet.io/idempotency-key"
	AnnotationIdempotencyRequest = "netfleet.io/idempotency-request-sha256"
)

// GameServerAllocationState is the outcome of an allocation.
//
// +kubebuilder:validation:Enum=Allocated;UnAllocated
type GameServerAllocationState string

const (
	// AllocationAllocated: a Ready server was marked Allocated for this request.
	AllocationAllocated GameServerAllocationState = "Allocated"
	// AllocationUnAllocated: no server was allocated; status.reason says why.
	AllocationUnAllocated GameServerAllocationState = "UnAllocated"
)

// Reasons of an UnAllocated result.
const (
	// AllocationReasonNoReadyServer: no Ready GameServer matches the request.
	AllocationReasonNoReadyServer = "NoReadyServer"
	// AllocationReasonInvalid: the request cannot be served as written (e.g. a bad selector).
	AllocationReasonInvalid = "Invalid"
)

// GameServerAllocationSpec says which servers may serve the request.
type GameServerAllocationSpec struct {
	// Fleet restricts the request to the GameServers of this Fleet (in the allocation's
	// namespace). Empty: any GameServer of the namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Fleet string `json:"fleet,omitempty"`

	// Selector restricts the request to GameServers whose labels it matches. Empty: every
	// server (of the fleet, if one is named).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Metadata is applied to the allocated GameServer (labels and annotations, added to its
	// own) and delivered to the game with the allocation.
	// +optional
	Metadata *AllocationMetadata `json:"metadata,omitempty"`

	// Payload is free-form match data delivered to the game with the allocation (its own
	// encoding, often JSON), at most 4096 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Payload string `json:"payload,omitempty"`

	// PlayerRoom asks for a server with room for this many players: one whose game declared a
	// capacity with at least this much free (capacity - connected - pending), Allocated servers
	// of a running match first (backfill), then Ready ones. A Ready server whose game declared no
	// capacity takes any request. The room is held for the players until they connect (see
	// GameServerPlayers.Pending). 0, the default, asks for a Ready server as before. Range
	// [0, 10000].
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	PlayerRoom int32 `json:"playerRoom,omitempty"`

	// Players names the players of the match, by the ids the game will know them by. The answer
	// carries one connect token per player (status.connectTokens): a player's client presents it
	// to join, on a server whose netcode.connectTokens.mode is Optional or Required
	// (docs/connect-tokens.md). Each id is 1 to 64 bytes, and no id is named twice. The request
	// asks for room for at least as many players as it names (the larger of playerRoom and
	// the number of players).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=64
	Players []string `json:"players,omitempty"`
}

// ConnectToken is one player's connect token.
type ConnectToken struct {
	// Player is the player id the token carries.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Player string `json:"player"`
	// Token is the token, which the player's client sends in its HELLO (base64 in JSON).
	// +kubebuilder:validation:MaxLength=344
	Token []byte `json:"token"`
}

// AllocationMetadata is the metadata an allocation applies to the GameServer it takes.
type AllocationMetadata struct {
	// Labels are added to the GameServer's labels: at most 32, each a valid label (a request
	// with an invalid key or value is UnAllocated with reason Invalid, naming it).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="every label value must be at most 63 characters"
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the GameServer's annotations: at most 32, each value at most
	// 1024 bytes.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 1024)",message="every annotation value must be at most 1024 bytes"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// GameServerAllocationStatus is the result of an allocation.
type GameServerAllocationStatus struct {
	// State is Allocated or UnAllocated; empty while the request waits to be served.
	// +optional
	State GameServerAllocationState `json:"state,omitempty"`

	// GameServerName is the allocated server.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	GameServerName string `json:"gameServerName,omitempty"`

	// Address is where players connect (the server's status.address).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address,omitempty"`

	// Port is the game port at Address (the server's status.port).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// NodeName is the node the server runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`

	// Reason says why the request is UnAllocated: NoReadyServer or Invalid.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`

	// Message explains the result for people.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// ConnectTokens holds one connect token per player of spec.players, in their order: each
	// binds the player to this server's address and port and to this allocation, and is good to
	// connect with until connectTokensExpire.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	ConnectTokens []ConnectToken `json:"connectTokens,omitempty"`

	// ConnectTokensExpire is when the connect tokens stop admitting players: the allocation's
	// time plus the server's netcode.connectTokens.ttlSeconds.
	// +optional
	ConnectTokensExpire *metav1.Time `json:"connectTokensExpire,omitempty"`
}

// GameServerAllocation asks for one Ready GameServer. It is a request: create it, and the operator
// marks one matching Ready server Allocated and records it in status (or UnAllocated with a
// reason). The spec cannot change afterwards. Matchmakers that need the answer in the same call
// use the operator's allocator endpoint, which takes the same object.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gsa,scope=Namespaced,categories=netfleet
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="GameServer",type=string,JSONPath=`.status.gameServerName`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.status.port`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GameServerAllocation struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create a new GameServerAllocation"
	Spec GameServerAllocationSpec `json:"spec,omitzero"`
	// +optional
	Status GameServerAllocationStatus `json:"status,omitzero"`
}

// GameServerAllocationList is a list of GameServerAllocations.
//
// +kubebuilder:object:root=true
type GameServerAllocationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GameServerAllocation `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &GameServerAllocation{}, &GameServerAllocationList{})
		return nil
	})
}

// Room is the room for players the request asks for: the larger of PlayerRoom and the number of
// Players it names.
func (s *GameServerAllocationSpec) Room() int32 { return max(s.PlayerRoom, int32(len(s.Players))) }
