package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FleetAutoscaleReview is the body of a Webhook policy's call, shaped like Agones'
// autoscaling.agones.dev/v1 FleetAutoscaleReview so that an Agones webhook answers it: the
// operator POSTs it with Request set (Content-Type application/json), and the webhook answers
// with it, Response set. An echoed Request in the answer is ignored.
type FleetAutoscaleReview struct {
	Request  *FleetAutoscaleRequest  `json:"request,omitempty"`
	Response *FleetAutoscaleResponse `json:"response,omitempty"`
}

// FleetAutoscaleRequest describes the fleet to the webhook.
type FleetAutoscaleRequest struct {
	// UID identifies this call; the response must carry it back.
	UID types.UID `json:"uid"`
	// Name and Namespace are the fleet's.
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Replicas is the fleet's spec.replicas now.
	Replicas int32 `json:"replicas"`
	// Status is the fleet's status, its counts (replicas, readyReplicas, allocatedReplicas) taken
	// from the fleet's servers as the operator sees them at the call, which may be ahead of the
	// stored status.
	Status FleetStatus `json:"status"`
	// MetaData is the fleet's name, namespace, uid, generation, labels and annotations.
	MetaData *metav1.ObjectMeta `json:"metadata,omitempty"`
}

// FleetAutoscaleResponse is the webhook's answer.
type FleetAutoscaleResponse struct {
	// UID is the request's.
	UID types.UID `json:"uid"`
	// Scale false leaves the fleet as it is; Replicas is then ignored.
	Scale bool `json:"scale"`
	// Replicas is the fleet's new spec.replicas, in [0, 10000].
	Replicas int32 `json:"replicas"`
}

// ErrReplicasOutOfRange is returned (wrapped) by DecodeFleetAutoscaleResponse for an answer
// whose replicas are outside [0, MaxFleetReplicas].
var ErrReplicasOutOfRange = errors.New("replicas out of range")

// DecodeFleetAutoscaleResponse reads a webhook's answer to the request uid: a
// FleetAutoscaleReview whose response carries uid and, when it scales, replicas in
// [0, MaxFleetReplicas]. Unknown fields are ignored, so that answers carrying more (an Agones
// webhook's) are read; a second JSON value is refused. Errors name the offending field.
func DecodeFleetAutoscaleResponse(body []byte, uid types.UID) (FleetAutoscaleResponse, error) {
	var review FleetAutoscaleReview
	if err := json.Unmarshal(body, &review); err != nil {
		return FleetAutoscaleResponse{}, fmt.Errorf("decode FleetAutoscaleReview: %w", err)
	}
	r := review.Response
	switch {
	case r == nil:
		return FleetAutoscaleResponse{}, errors.New("response: missing")
	case r.UID != uid:
		return FleetAutoscaleResponse{}, fmt.Errorf("response.uid %q: want the request's %q", r.UID, uid)
	case r.Scale && (r.Replicas < 0 || r.Replicas > MaxFleetReplicas):
		return FleetAutoscaleResponse{}, fmt.Errorf("response.replicas %d: %w [0, %d]", r.Replicas, ErrReplicasOutOfRange, MaxFleetReplicas)
	}
	return *r, nil
}
