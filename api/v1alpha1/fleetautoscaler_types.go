package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MaxFleetReplicas is the largest spec.replicas a Fleet takes, and so the largest count a
// FleetAutoscaler sets.
const MaxFleetReplicas = 10000

// FleetAutoscalerPolicyType is how a FleetAutoscaler decides the replicas of its fleet.
//
// +kubebuilder:validation:Enum=Buffer;Webhook
type FleetAutoscalerPolicyType string

const (
	// FleetAutoscalerPolicyBuffer keeps a buffer of servers that are not Allocated.
	FleetAutoscalerPolicyBuffer FleetAutoscalerPolicyType = "Buffer"
	// FleetAutoscalerPolicyWebhook asks an HTTP endpoint for the replicas.
	FleetAutoscalerPolicyWebhook FleetAutoscalerPolicyType = "Webhook"
)

// BufferPolicy keeps bufferSize servers of the fleet free (not Allocated): Ready ones, and those
// still starting. The fleet's replicas are the Allocated servers plus the buffer, within
// [minReplicas, maxReplicas].
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas",fieldPath=".minReplicas"
// +kubebuilder:validation:XValidation:rule="type(self.bufferSize) != int || self.bufferSize <= self.maxReplicas",message="bufferSize must not exceed maxReplicas",fieldPath=".bufferSize"
type BufferPolicy struct {
	// BufferSize is how many servers are kept free: a count from 1 to 10000, or a percentage of
	// the fleet's replicas from 1% to 99%. With a percentage p, the fleet gets the fewest replicas
	// of which at least p% are free for its Allocated servers (ceil(allocated * 100 / (100 - p))),
	// and always at least one free server.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 && self <= 10000 : self.matches('^[1-9][0-9]?%$')",message="bufferSize must be a count from 1 to 10000 or a percentage from 1% to 99%"
	BufferSize intstr.IntOrString `json:"bufferSize"`

	// MinReplicas is the fewest replicas the fleet is given, whatever the buffer asks. Range
	// [0, 10000], at most maxReplicas. Default 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MinReplicas int32 `json:"minReplicas"`

	// MaxReplicas is the most replicas the fleet is given. Range [1, 10000], at least bufferSize
	// when that is a count. Allocated servers are never removed to honour it: a fleet with more
	// Allocated servers than maxReplicas keeps them all, and no free one.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxReplicas int32 `json:"maxReplicas"`
}

// WebhookServiceReference names a Service the webhook is reached through, at
// <scheme>://<name>.<namespace>.svc:<port><path>; the scheme is https when a caBundle is given,
// else http.
type WebhookServiceReference struct {
	// Namespace is the Service's namespace. Default: the FleetAutoscaler's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// Name is the Service's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Port is the Service's port. Range [1, 65535]. Default 8000.
	// +optional
	// +kubebuilder:default=8000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// Path is the URL path the request is posted to, starting with '/'. Default "/".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^?#\s]*$`
	Path string `json:"path,omitempty"`
}

// WebhookPolicy asks an HTTP endpoint for the fleet's replicas: the operator POSTs a
// FleetAutoscaleReview with its request (JSON) and uses the response's replicas. An endpoint
// that times out, fails, answers something other than a well-formed response for this request or
// a replica count outside [0, 10000] leaves the fleet as it is; the call is retried with
// back-off.
//
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.service)",message="exactly one of url and service must be set",fieldPath=".url"
// +kubebuilder:validation:XValidation:rule="!has(self.caBundle) || !has(self.url) || self.url.startsWith('https://')",message="caBundle needs an https url",fieldPath=".caBundle"
type WebhookPolicy struct {
	// URL is the endpoint, an absolute http or https URL without a fragment.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != '' && !self.contains('#')",message="url must be an absolute http or https URL without a fragment"
	URL *string `json:"url,omitempty"`

	// Service is the Service the endpoint is reached through, instead of a URL.
	// +optional
	Service *WebhookServiceReference `json:"service,omitempty"`

	// CABundle is the PEM-encoded CA certificates the endpoint's TLS certificate is checked
	// against; with it, a Service is called over https. Without it, an https URL is checked
	// against the operator's system roots.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CABundle []byte `json:"caBundle,omitempty"`

	// TimeoutSeconds bounds one call, from connecting to reading the whole answer. Range [1, 30].
	// Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// FleetAutoscalerPolicy is one policy: its type and that type's settings, the others unset.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'Buffer' || has(self.buffer)",message="buffer is required when type is Buffer",fieldPath=".buffer"
// +kubebuilder:validation:XValidation:rule="self.type != 'Webhook' || has(self.webhook)",message="webhook is required when type is Webhook",fieldPath=".webhook"
// +kubebuilder:validation:XValidation:rule="self.type == 'Buffer' || !has(self.buffer)",message="buffer may only be set when type is Buffer",fieldPath=".buffer"
// +kubebuilder:validation:XValidation:rule="self.type == 'Webhook' || !has(self.webhook)",message="webhook may only be set when type is Webhook",fieldPath=".webhook"
type FleetAutoscalerPolicy struct {
	// Type is Buffer or Webhook.
	// +required
	Type FleetAutoscalerPolicyType `json:"type"`

	// Buffer configures the Buffer policy; only with type Buffer.
	// +optional
	Buffer *BufferPolicy `json:"buffer,omitempty"`

	// Webhook configures the Webhook policy; only with type Webhook.
	// +optional
	Webhook *WebhookPolicy `json:"webhook,omitempty"`
}

// FleetAutoscalerSyncMode is when a FleetAutoscaler looks at its fleet.
//
// +kubebuilder:validation:Enum=Events;Interval
type FleetAutoscalerSyncMode string

const (
	// FleetAutoscalerSyncEvents looks at the fleet on every change that can move it — an
	// allocation, a server that ends or is created, an edit of the fleet or of the autoscaler —
	// and at least every intervalSeconds.
	FleetAutoscalerSyncEvents FleetAutoscalerSyncMode = "Events"
	// FleetAutoscalerSyncInterval looks at the fleet every intervalSeconds and when the
	// autoscaler is edited, not on the fleet's changes: for a webhook that must be called at a
	// steady rate.
	FleetAutoscalerSyncInterval FleetAutoscalerSyncMode = "Interval"
)

// FleetAutoscalerSync says when the autoscaler looks at its fleet.
type FleetAutoscalerSync struct {
	// Mode is Events (on every change of the fleet and its servers, and at least every
	// intervalSeconds) or Interval (every intervalSeconds only). Default Events.
	// +optional
	// +kubebuilder:default=Events
	Mode FleetAutoscalerSyncMode `json:"mode,omitempty"`

	// IntervalSeconds is the longest time between two looks: the period of Interval, the floor
	// of Events. Range [1, 86400]. Default 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	IntervalSeconds int32 `json:"intervalSeconds,omitempty"`
}

// FleetAutoscalerSpec is the desired state of a FleetAutoscaler.
type FleetAutoscalerSpec struct {
	// FleetName is the Fleet to scale, in the autoscaler's namespace. When several autoscalers
	// name one fleet, the oldest scales it and the others report AbleToScale False.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	FleetName string `json:"fleetName"`

	// Policy decides the fleet's replicas.
	// +required
	Policy FleetAutoscalerPolicy `json:"policy"`

	// Sync says when the autoscaler looks at the fleet. Default: on every change, and at least
	// every 30 s.
	// +optional
	// +kubebuilder:default={mode: Events, intervalSeconds: 30}
	Sync FleetAutoscalerSync `json:"sync,omitzero"`
}

// Condition types of a FleetAutoscaler.
const (
	// ConditionAbleToScale is True while the autoscaler can read its fleet, decide its replicas
	// and write them; False says what stops it (the reason), and the fleet is left as it is.
	ConditionAbleToScale = "AbleToScale"
	// ConditionScalingLimited is True while the replicas the policy wants are outside
	// [minReplicas, maxReplicas] and were capped.
	ConditionScalingLimited = "ScalingLimited"
)

// Reasons of the AbleToScale condition.
const (
	// ReasonScalingSucceeded: the fleet has, or was just given, the replicas the policy wants.
	ReasonScalingSucceeded = "Succeeded"
	// ReasonFleetNotFound: no Fleet of spec.fleetName exists in the namespace.
	ReasonFleetNotFound = "FleetNotFound"
	// ReasonFleetDeleting: the fleet is being deleted.
	ReasonFleetDeleting = "FleetDeleting"
	// ReasonFleetHasOtherAutoscaler: an older FleetAutoscaler names the same fleet and scales it.
	ReasonFleetHasOtherAutoscaler = "FleetHasOtherAutoscaler"
	// ReasonScaleFailed: writing the fleet's replicas failed; retried.
	ReasonScaleFailed = "ScaleFailed"
	// ReasonWebhookTimeout: the webhook did not answer within timeoutSeconds.
	ReasonWebhookTimeout = "WebhookTimeout"
	// ReasonWebhookUnreachable: the webhook could not be called (no connection, TLS failure).
	ReasonWebhookUnreachable = "WebhookUnreachable"
	// ReasonWebhookHTTPError: the webhook answered with a status other than 200.
	ReasonWebhookHTTPError = "WebhookHTTPError"
	// ReasonWebhookMalformedResponse: the answer is not a FleetAutoscaleReview with a response
	// for this request.
	ReasonWebhookMalformedResponse = "WebhookMalformedResponse"
	// ReasonWebhookReplicasOutOfRange: the answer's replicas are outside [0, 10000].
	ReasonWebhookReplicasOutOfRange = "WebhookReplicasOutOfRange"
	// ReasonInvalidCABundle: spec.policy.webhook.caBundle holds no PEM certificate; only an edit
	// fixes it.
	ReasonInvalidCABundle = "InvalidCABundle"
	// ReasonInvalidPolicy: the policy cannot be used as written; only an edit fixes it.
	ReasonInvalidPolicy = "InvalidPolicy"
)

// Reasons of the ScalingLimited condition.
const (
	// ReasonWithinLimits: the policy's replicas are used as they are.
	ReasonWithinLimits = "WithinLimits"
	// ReasonAtMaxReplicas: the buffer wants more than maxReplicas.
	ReasonAtMaxReplicas = "AtMaxReplicas"
	// ReasonAtMinReplicas: the buffer wants fewer than minReplicas.
	ReasonAtMinReplicas = "AtMinReplicas"
)

// FleetAutoscalerStatus is the observed state of a FleetAutoscaler.
type FleetAutoscalerStatus struct {
	// CurrentReplicas is how many of the fleet's servers exist and have not ended, as the
	// autoscaler last saw them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentReplicas int32 `json:"currentReplicas"`

	// DesiredReplicas is the replicas the autoscaler last decided for the fleet, limits applied.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DesiredReplicas int32 `json:"desiredReplicas"`

	// AllocatedReplicas is how many of the fleet's servers were Allocated when it last decided.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AllocatedReplicas int32 `json:"allocatedReplicas"`

	// LastScaleTime is when the autoscaler last changed the fleet's replicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// Conditions are AbleToScale and ScalingLimited.
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

// FleetAutoscaler sets the replicas of one Fleet: it keeps a buffer of free servers, or asks a
// webhook. It looks at the fleet whenever a server is allocated or ends and whenever the fleet
// changes, and at least every spec.sync.intervalSeconds. Scaling down never removes an Allocated
// server (the fleet removes free ones only).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fas,scope=Namespaced,categories=netfleet
// +kubebuilder:printcolumn:name="Fleet",type=string,JSONPath=`.spec.fleetName`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy.type`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocatedReplicas`
// +kubebuilder:printcolumn:name="Able",type=string,JSONPath=`.status.conditions[?(@.type=="AbleToScale")].status`,description="AbleToScale"
// +kubebuilder:printcolumn:name="Limited",type=string,JSONPath=`.status.conditions[?(@.type=="ScalingLimited")].status`,description="ScalingLimited"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="AbleToScale")].reason`,priority=1
// +kubebuilder:printcolumn:name="Last Scale",type=date,JSONPath=`.status.lastScaleTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetAutoscaler struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FleetAutoscalerSpec `json:"spec"`
	// +optional
	Status FleetAutoscalerStatus `json:"status,omitzero"`
}

// FleetAutoscalerList is a list of FleetAutoscalers.
//
// +kubebuilder:object:root=true
type FleetAutoscalerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetAutoscaler `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &FleetAutoscaler{}, &FleetAutoscalerList{})
		return nil
	})
}
