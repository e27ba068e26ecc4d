package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netfleet/netfleet/api/netcode"
)

// LabelGameServer is set on a GameServer's Pod; its value is the GameServer's name.
const LabelGameServer = "netfleet.io/gameserver"

// GameServerState is where a GameServer is in its life.
//
//	Creating -> Starting -> Ready <-> Allocated        (allocation; the game's Ready ends the match)
//	                          ^  \
//	                          |   Reserved             (the game's Reserve; Ready when it runs out)
//	                          +---/
//	any state but a final one --> Shutdown | Error | Unhealthy (final)
//
// Creating: the Pod does not exist yet or is not scheduled. Starting: the Pod is scheduled and the
// process is starting, has not received its config yet, or is not ready (a Ready server whose
// process restarts goes back to Starting until it is ready again). Ready: the process runs a
// config pushed by the operator and its Pod is ready. Allocated: a match owns the server; an
// allocation sets it, and it stays until the game calls Ready (the match is over and the server
// is reused: Ready again), the game shuts down, or the process ends. Reserved: the game held
// itself back from allocation for a while; a Fleet does not remove it on scale-down. Shutdown:
// the game called Shutdown, or the process ended after it had been Ready (Pod Succeeded or
// Failed) — the match is over. Error: the server failed — its Pod failed before it was ever
// Ready, could not be created, or vanished. Unhealthy: the process stopped answering its health
// check (the tick loop stalled or the admin API went silent) for spec.health.unhealthyAfterSeconds;
// an Allocated server is only reported (condition Healthy False) and kept, unless
// spec.health.replaceAllocated. Shutdown, Error and Unhealthy are final: the Pod is kept for
// inspection and a Fleet replaces the server with a new one.
//
// +kubebuilder:validation:Enum=Creating;Starting;Ready;Reserved;Allocated;Shutdown;Error;Unhealthy
type GameServerState string

// The states of a GameServer.
const (
	GameServerStateCreating  GameServerState = "Creating"
	GameServerStateStarting  GameServerState = "Starting"
	GameServerStateReady     GameServerState = "Ready"
	GameServerStateReserved  GameServerState = "Reserved"
	GameServerStateAllocated GameServerState = "Allocated"
	GameServerStateShutdown  GameServerState = "Shutdown"
	GameServerStateError     GameServerState = "Error"
	GameServerStateUnhealthy GameServerState = "Unhealthy"
)

// IsFinal reports whether s is a state a GameServer never leaves.
func (s GameServerState) IsFinal() bool {
	return s == GameServerStateShutdown || s == GameServerStateError || s == GameServerStateUnhealthy
}

// Condition types of a GameServer.
const (
	// ConditionReady is True while the server can take (or serves) a match: its Pod is ready and
	// its process runs a pushed config.
	ConditionReady = "Ready"
	// ConditionConfigApplied is True when the process runs exactly spec.netcode of the current
	// metadata.generation.
	ConditionConfigApplied = "ConfigApplied"
	// ConditionHealthy is True while the process answers its health check; False says since
	// when it has not.
	ConditionHealthy = "Healthy"
)

// Reasons of the ConfigApplied condition.
const (
	// ReasonApplied: the process runs the desired config.
	ReasonApplied = "Applied"
	// ReasonPending: the config has not been pushed yet (the process is not running or a push is
	// in flight).
	ReasonPending = "Pending"
	// ReasonRefused: the process refused the config (the message says why); it keeps running its
	// previous config until spec.netcode changes.
	ReasonRefused = "Refused"
	// ReasonUnreachable: the admin endpoint did not answer; the push is retried with backoff.
	ReasonUnreachable = "Unreachable"
)

// PortPolicy says how a game port is exposed on the node.
//
// +kubebuilder:validation:Enum=Static;Dynamic;None
type PortPolicy string

const (
	// PortPolicyStatic exposes the port on the node at the given hostPort.
	PortPolicyStatic PortPolicy = "Static"
	// PortPolicyDynamic exposes the port on a host port the operator picks from its port range.
	PortPolicyDynamic PortPolicy = "Dynamic"
	// PortPolicyNone exposes no host port: players reach the server at the Pod IP and container
	// port (a pod network routable from clients, or in-cluster clients).
	PortPolicyNone PortPolicy = "None"
)

// GameServerPort is one port the game server listens on.
//
// +kubebuilder:validation:XValidation:rule="self.portPolicy != 'Static' || has(self.hostPort)",message="hostPort is required when portPolicy is Static",fieldPath=".hostPort"
// +kubebuilder:validation:XValidation:rule="self.portPolicy == 'Static' || !has(self.hostPort)",message="hostPort may only be set when portPolicy is Static",fieldPath=".hostPort"
type GameServerPort struct {
	// Name names the port (an IANA service name: lower-case letters, digits and '-', at most 15
	// characters). Names are unique within spec.ports.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// ContainerPort is the port the process listens on inside the Pod. The first entry of
	// spec.ports is the game port, passed to the process as NETFLEET_GAME_PORT.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort int32 `json:"containerPort"`

	// Protocol is UDP or TCP. Default UDP.
	// +optional
	// +kubebuilder:validation:Enum=UDP;TCP
	// +kubebuilder:default=UDP
	Protocol corev1.Protocol `json:"protocol,omitempty"`

	// PortPolicy is Static (hostPort as given), Dynamic (a host port picked by the operator from
	// its range) or None (no host port). Default Dynamic.
	// +optional
	// +kubebuilder:default=Dynamic
	PortPolicy PortPolicy `json:"portPolicy,omitempty"`

	// HostPort is the node port for a Static port; it must be unset otherwise. Range [1, 65535].
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HostPort int32 `json:"hostPort,omitempty"`
}

// GameServerHealth says how the operator judges a server's health. The operator follows each
// process's lifecycle over the admin API with a long-poll that answers at least every 10 seconds;
// an answer that reports a ticking loop is a passed health check.
type GameServerHealth struct {
	// Disabled turns the health check off: the server never becomes Unhealthy.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// UnhealthyAfterSeconds is how long a server may go without a passed health check before it
	// is Unhealthy. Default 30, range [5, 3600]; keep it above the long-poll's 10 seconds.
	// +optional
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=30
	UnhealthyAfterSeconds int32 `json:"unhealthyAfterSeconds,omitempty"`

	// ReplaceAllocated makes an Allocated server Unhealthy too (its Fleet replaces it, ending its
	// match). By default an Allocated server is only reported — condition Healthy False and an
	// event — and kept, since its players may still be served.
	// +optional
	ReplaceAllocated bool `json:"replaceAllocated,omitempty"`
}

// GameServerSpec is the desired state of a GameServer.
//
// +kubebuilder:validation:XValidation:rule="has(self.template.spec) && size(self.template.spec.containers) > 0",message="template.spec.containers must hold at least one container",fieldPath=".template.spec.containers"
// +kubebuilder:validation:XValidation:rule="self.ports.all(p, p.protocol != 'TCP' || p.containerPort != self.adminPort)",message="adminPort must differ from every TCP containerPort in ports",fieldPath=".adminPort"
// +kubebuilder:validation:XValidation:rule="!has(self.container) || (has(self.template.spec) && self.template.spec.containers.exists(c, c.name == self.container))",message="container must name a container of template.spec.containers",fieldPath=".container"
type GameServerSpec struct {
	// Container names the game-server container in template. Default: the first container.
	// Immutable on a GameServer.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container,omitempty"`

	// Ports are the game's ports; at least one, at most 16, names unique, the first one is the
	// game port that status.port reports. Immutable on a GameServer: the Pod is created once.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.filter(q, q.containerPort == p.containerPort && q.protocol == p.protocol).size() == 1)",message="containerPort and protocol must be unique within ports"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.hostPort) || self.filter(q, has(q.hostPort) && q.hostPort == p.hostPort && q.protocol == p.protocol).size() == 1)",message="hostPort and protocol must be unique within ports"
	Ports []GameServerPort `json:"ports"`

	// AdminPort is the TCP port of the game server's admin API inside the Pod (NETFLEET_ADMIN_PORT):
	// live config, peers, health and metrics. Default 8080, range [1, 65535]. Immutable on a
	// GameServer.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8080
	AdminPort int32 `json:"adminPort,omitempty"`

	// Netcode is the live netcode config. An edit reaches the running process without a Pod
	// restart; the process applies it between two ticks. Absent fields take their defaults.
	// +optional
	// +kubebuilder:default={}
	Netcode netcode.NetcodeConfig `json:"netcode,omitzero"`

	// Health says how the operator judges the server's health (see GameServerHealth).
	// +optional
	// +kubebuilder:default={}
	Health GameServerHealth `json:"health,omitzero"`

	// Template is the Pod template. The operator adds the ports, the NETFLEET_* environment, the
	// admin port and a readiness probe on /readyz to the game-server container. The Pod is created
	// once: template edits take effect for new GameServers (a Fleet rolls them), never by
	// restarting a running match.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`
}

// GameServerNetcodeStatus is what the process reports about its running config.
type GameServerNetcodeStatus struct {
	// AppliedGeneration is the metadata.generation whose spec.netcode the process runs; 0 before
	// the first successful push.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AppliedGeneration int64 `json:"appliedGeneration,omitempty"`

	// AppliedHash is the hash (netcode.NetcodeConfig.Hash) of the config the process runs.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	AppliedHash string `json:"appliedHash,omitempty"`

	// InstanceID identifies the process that applied it; it changes when the process restarts,
	// and the operator then pushes the config again.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	InstanceID string `json:"instanceID,omitempty"`

	// Progress is "<appliedGeneration>/<metadata.generation>", for display.
	// +optional
	// +kubebuilder:validation:MaxLength=48
	Progress string `json:"progress,omitempty"`

	// ConnectKeyIDs are the ids of the connect-token keys the process holds, the newest first;
	// empty while its connectTokens.mode is Disabled.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	ConnectKeyIDs []int64 `json:"connectKeyIds,omitempty"`
}

// GameServerPlayers is what the process reports about its players, and the room allocations hold.
type GameServerPlayers struct {
	// Connected is the number of connected players.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Connected int32 `json:"connected,omitempty"`

	// Capacity is the number of players the game takes, as it declared; 0 when it has not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Capacity int32 `json:"capacity,omitempty"`

	// Pending is the room allocations took for players that have not connected yet. It drops as
	// players connect and is released at PendingUntil or when the match ends. An allocation that
	// asks for room for N players needs Capacity - Connected - Pending >= N.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Pending int32 `json:"pending,omitempty"`

	// PendingUntil is when the pending room is released.
	// +optional
	PendingUntil *metav1.Time `json:"pendingUntil,omitempty"`
}

// GameServerStatus is the observed state of a GameServer.
type GameServerStatus struct {
	// State is where the server is in its life (see GameServerState).
	// +optional
	State GameServerState `json:"state,omitempty"`

	// Address is where players connect: the node's address (ExternalIP, else InternalIP) when the
	// game port has a host port, else the Pod IP.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address,omitempty"`

	// Port is the game port at Address: the host port, or the container port when there is none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// NodeName is the node the Pod runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`

	// AllocatedBy is the UID of the allocation that last allocated the server (the latest one of
	// its match, after a backfill), set in the same write that marks it Allocated: the
	// GameServerAllocation's UID, or one the operator made up for a request of the allocator
	// endpoint without an Idempotency-Key. An operator that stops between marking a server and
	// recording the result in the GameServerAllocation finds the server by it, instead of
	// allocating a second one; and a process that reports this allocation and is Ready again has
	// ended its match.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	AllocatedBy string `json:"allocatedBy,omitempty"`

	// Netcode reports the config the process runs.
	// +optional
	Netcode GameServerNetcodeStatus `json:"netcode,omitzero"`

	// Players reports the connected players, the capacity the game declared and the room held
	// by allocations.
	// +optional
	Players *GameServerPlayers `json:"players,omitempty"`

	// Counters are the game's named counters, as it set them.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Counters map[string]int64 `json:"counters,omitempty"`

	// ReservedUntil is when a Reserved server becomes Ready again.
	// +optional
	ReservedUntil *metav1.Time `json:"reservedUntil,omitempty"`

	// Conditions are Ready and ConfigApplied.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the metadata.generation the controller last reconciled completely.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// GameServer is one dedicated game-server process in its own Pod, with live netcode config.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gs,scope=Namespaced,categories=netfleet
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.status.port`
// +kubebuilder:printcolumn:name="Players",type=integer,JSONPath=`.status.players.connected`,description="connected players"
// +kubebuilder:printcolumn:name="Capacity",type=integer,JSONPath=`.status.players.capacity`,description="players the game takes"
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.status.netcode.progress`,description="applied/desired generation of spec.netcode"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GameServer struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state. The fields the Pod is built from are immutable here; the rules
	// sit on this field rather than on GameServerSpec because a Fleet's template embeds the same
	// type and there an edit rolls new servers instead.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.ports == oldSelf.ports",message="ports are immutable",fieldPath=".ports"
	// +kubebuilder:validation:XValidation:rule="!has(self.adminPort) || !has(oldSelf.adminPort) || self.adminPort == oldSelf.adminPort",message="adminPort is immutable",fieldPath=".adminPort"
	// +kubebuilder:validation:XValidation:rule="!has(self.container) || !has(oldSelf.container) || self.container == oldSelf.container",message="container is immutable",fieldPath=".container"
	Spec GameServerSpec `json:"spec"`
	// +optional
	Status GameServerStatus `json:"status,omitzero"`
}

// GameServerList is a list of GameServers.
//
// +kubebuilder:object:root=true
type GameServerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GameServer `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &GameServer{}, &GameServerList{})
		return nil
	})
}
