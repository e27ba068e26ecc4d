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
//	Creating -> Starting -> Ready <-> Allocated
//	    |           |         |           |
//	    +-----------+---------+-----------+--> Shutdown (the process ended) | Error
//
// Creating: the Pod does not exist yet or is not scheduled. Starting: the Pod is scheduled and the
// process is starting, has not received its config yet, or is not ready (a Ready server whose
// process restarts goes back to Starting until it is ready again). Ready: the process runs a
// config pushed by the operator and its Pod is ready. Allocated: a match owns the server; only
// allocation sets it, and the GameServer controller keeps it (and keeps pushing config) until the
// process ends. Shutdown: the process ended after it had been Ready (Pod Succeeded or Failed) —
// the match is over. Error: the server failed — its Pod failed before it was ever Ready, could
// not be created, or vanished. Shutdown and Error are final: the Pod is kept for inspection and a
// new GameServer replaces the old one.
//
// +kubebuilder:validation:Enum=Creating;Starting;Ready;Allocated;Shutdown;Error
type GameServerState string

// The states of a GameServer.
const (
	GameServerStateCreating  GameServerState = "Creating"
	GameServerStateStarting  GameServerState = "Starting"
	GameServerStateReady     GameServerState = "Ready"
	GameServerStateAllocated GameServerState = "Allocated"
	GameServerStateShutdown  GameServerState = "Shutdown"
	GameServerStateError     GameServerState = "Error"
)

// IsFinal reports whether s is a state a GameServer never leaves.
func (s GameServerState) IsFinal() bool {
	return s == GameServerStateShutdown || s == GameServerStateError
}

// Condition types of a GameServer.
const (
	// ConditionReady is True while the server can take (or serves) a match: its Pod is ready and
	// its process runs a pushed config.
	ConditionReady = "Ready"
	// ConditionConfigApplied is True when the process runs exactly spec.netcode of the current
	// metadata.generation.
	ConditionConfigApplied = "ConfigApplied"
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

// GameServerSpec is the desired state of a GameServer.
//
// +kubebuilder:validation:XValidation:rule="self.ports.all(p, p.protocol != 'TCP' || p.containerPort != self.adminPort)",message="adminPort must differ from every TCP containerPort in ports",fieldPath=".adminPort"
// +kubebuilder:validation:XValidation:rule="!has(self.container) || self.template.spec.containers.exists(c, c.name == self.container)",message="container must name a container of template.spec.containers",fieldPath=".container"
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

	// AllocatedBy is the UID of the GameServerAllocation that allocated the server, set in the
	// same write that marks it Allocated. An allocation served through the allocator endpoint
	// without an Idempotency-Key has no GameServerAllocation and leaves it empty. An operator that
	// stops between marking a server and recording the result in the GameServerAllocation finds
	// the server by it, instead of allocating a second one.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	AllocatedBy string `json:"allocatedBy,omitempty"`

	// Netcode reports the config the process runs.
	// +optional
	Netcode GameServerNetcodeStatus `json:"netcode,omitzero"`

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
