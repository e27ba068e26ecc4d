package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// LabelFleet is set on every GameServer of a Fleet; its value is the Fleet's name.
	LabelFleet = "netfleet.io/fleet"
	// LabelTemplateHash is set on every GameServer of a Fleet; its value is the hash of the
	// template the server was created from, leaving out spec.netcode (which is applied in place).
	LabelTemplateHash = "netfleet.io/template-hash"
)

// GameServerTemplateSpec is the template a Fleet creates its GameServers from.
type GameServerTemplateSpec struct {
	// Metadata holds the labels and annotations every GameServer of the fleet gets. The operator
	// adds netfleet.io/fleet and netfleet.io/template-hash.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is every GameServer's spec. An edit of spec.netcode alone is applied in place to every
	// server of the fleet, Allocated ones included, without touching a Pod; any other edit rolls
	// new servers according to the fleet's strategy.
	// +required
	Spec GameServerSpec `json:"spec"`
}

// FleetStrategyType is how a Fleet replaces servers whose template is out of date.
//
// +kubebuilder:validation:Enum=RollingUpdate;Recreate
type FleetStrategyType string

const (
	// FleetStrategyRollingUpdate replaces servers a few at a time, bounded by maxSurge and
	// maxUnavailable.
	FleetStrategyRollingUpdate FleetStrategyType = "RollingUpdate"
	// FleetStrategyRecreate removes every out-of-date server that is not Allocated first, then
	// creates the new ones.
	FleetStrategyRecreate FleetStrategyType = "Recreate"
)

// RollingUpdateFleetStrategy bounds a rolling update. Both bounds count servers that are up
// (Ready or Allocated) against spec.replicas.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxSurge) || !has(self.maxUnavailable) || !(string(self.maxSurge) in ['0', '0%']) || !(string(self.maxUnavailable) in ['0', '0%'])",message="maxSurge and maxUnavailable must not both be zero",fieldPath=".maxUnavailable"
type RollingUpdateFleetStrategy struct {
	// MaxSurge is how many servers may exist above spec.replicas during the update: a number or a
	// percentage of spec.replicas, rounded up. Default 25%.
	// +optional
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 && self <= 100000 : self.matches('^[0-9]{1,5}%$')",message="maxSurge must be a non-negative number or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// MaxUnavailable is how many servers may be down (neither Ready nor Allocated) below
	// spec.replicas during the update: a number or a percentage of spec.replicas, rounded down.
	// Default 25%.
	// +optional
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 && self <= 100000 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxUnavailable must be a non-negative number or a percentage from 0% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// FleetStrategy says how a template edit (other than a netcode-only one) replaces servers. An
// Allocated server is never removed by a rollout: it stays, with the new netcode, until its
// process ends.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'RollingUpdate' || !has(self.rollingUpdate)",message="rollingUpdate may only be set when type is RollingUpdate",fieldPath=".rollingUpdate"
type FleetStrategy struct {
	// Type is RollingUpdate or Recreate. Default RollingUpdate.
	// +optional
	// +kubebuilder:default=RollingUpdate
	Type FleetStrategyType `json:"type,omitempty"`

	// RollingUpdate bounds a rolling update; only with type RollingUpdate.
	// +optional
	RollingUpdate *RollingUpdateFleetStrategy `json:"rollingUpdate,omitempty"`
}

// FleetSpec is the desired state of a Fleet.
type FleetSpec struct {
	// Replicas is how many GameServers the fleet keeps, Allocated ones included; servers whose
	// process ended (Shutdown, Error) are removed and replaced. Range [0, 10000]. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas int32 `json:"replicas"`

	// Strategy says how a pod-template edit replaces servers. Default RollingUpdate with 25%
	// surge and 25% unavailable.
	// +optional
	// +kubebuilder:default={type: RollingUpdate}
	Strategy FleetStrategy `json:"strategy,omitzero"`

	// Template is every GameServer's template.
	// +required
	Template GameServerTemplateSpec `json:"template"`
}

// Condition types of a Fleet.
const (
	// ConditionAvailable is True while at least spec.replicas minus maxUnavailable servers are
	// up (Ready or Allocated).
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the fleet creates, replaces or removes servers, or
	// waits for servers of an older template to end their match.
	ConditionProgressing = "Progressing"
)

// FleetStatus is the observed state of a Fleet.
type FleetStatus struct {
	// Replicas is how many of the fleet's GameServers exist and have not ended (every state but
	// Shutdown and Error).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is how many are Ready: up and free for allocation.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AllocatedReplicas is how many are Allocated: a match runs on them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AllocatedReplicas int32 `json:"allocatedReplicas,omitempty"`

	// ReservedReplicas is how many are Reserved: their games held them back from allocation.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReservedReplicas int32 `json:"reservedReplicas,omitempty"`

	// Players is how many players are connected to the fleet's servers, and PlayerCapacity how
	// many their games declared they take (the sums of their status.players).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Players int32 `json:"players,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	PlayerCapacity int32 `json:"playerCapacity,omitempty"`

	// ConfigAppliedReplicas is how many run the fleet's current spec.template.spec.netcode.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConfigAppliedReplicas int32 `json:"configAppliedReplicas,omitempty"`

	// UpdatedReplicas is how many were created from the fleet's current template (netcode aside).
	// +optional
	// +kubebuilder:validation:Minimum=0
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// Config is "<configAppliedReplicas>/<replicas>", for display.
	// +optional
	// +kubebuilder:validation:MaxLength=24
	Config string `json:"config,omitempty"`

	// Selector is the label selector of the fleet's GameServers, for the scale subresource.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Selector string `json:"selector,omitempty"`

	// Conditions are Available, Progressing and ConfigApplied.
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

// Fleet keeps a number of GameServers from one template. A netcode-only edit of the template
// reaches every server live; any other edit rolls servers, never removing an Allocated one.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=flt,scope=Namespaced,categories=netfleet
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocatedReplicas`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updatedReplicas`
// +kubebuilder:printcolumn:name="Players",type=integer,JSONPath=`.status.players`,description="players connected to the fleet's servers"
// +kubebuilder:printcolumn:name="Capacity",type=integer,JSONPath=`.status.playerCapacity`,description="players the fleet's games take"
// +kubebuilder:printcolumn:name="Reserved",type=integer,JSONPath=`.status.reservedReplicas`,priority=1
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.status.config`,description="servers running the fleet's netcode / servers"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: it is the value of the netfleet.io/fleet label"
type Fleet struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FleetSpec `json:"spec"`
	// +optional
	Status FleetStatus `json:"status,omitzero"`
}

// FleetList is a list of Fleets.
//
// +kubebuilder:object:root=true
type FleetList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Fleet `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Fleet{}, &FleetList{})
		return nil
	})
}
