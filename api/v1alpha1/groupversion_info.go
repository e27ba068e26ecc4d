// Package v1alpha1 holds netfleet's custom resources in the API group netfleet.io: GameServer
// (one dedicated game-server process in its own Pod, with live netcode config), Fleet (a number
// of GameServers from one template), GameServerAllocation (a request for one Ready server) and
// FleetAutoscaler (sets a Fleet's replicas from a buffer policy or a webhook).
// Their netcode settings embed netcode.NetcodeConfig, so the CRD's schema and the game server's
// validation come from one definition.
//
// It imports Kubernetes API types and api/netcode only; it must not import controllers or the
// game server.
//
// +kubebuilder:object:generate=true
// +groupName=netfleet.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of netfleet's resources.
	GroupVersion = schema.GroupVersion{Group: "netfleet.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme; each kind's file
	// registers its types in init.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
