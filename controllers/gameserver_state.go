package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// nextState is the GameServer state machine (see v1alpha1.GameServerState): the state a server in
// state cur moves to, given its Pod (nil when there is none) and whether its current process runs
// a config the operator pushed. It is pure, so every transition is tested without an API server.
func nextState(cur v1alpha1.GameServerState, pod *corev1.Pod, configRunning bool) v1alpha1.GameServerState {
	if cur.IsFinal() {
		return cur
	}
	wasUp := cur == v1alpha1.GameServerStateReady || cur == v1alpha1.GameServerStateAllocated
	switch {
	case pod == nil && (cur == "" || cur == v1alpha1.GameServerStateCreating):
		return v1alpha1.GameServerStateCreating
	case pod == nil:
		// The Pod vanished (deleted, evicted, its node lost): the process is gone with it.
		return v1alpha1.GameServerStateError
	case pod.Status.Phase == corev1.PodSucceeded:
		return v1alpha1.GameServerStateShutdown
	case pod.Status.Phase == corev1.PodFailed && wasUp:
		// A server that served ended its match, however its process exited.
		return v1alpha1.GameServerStateShutdown
	case pod.Status.Phase == corev1.PodFailed:
		return v1alpha1.GameServerStateError
	case cur == v1alpha1.GameServerStateAllocated:
		// A match owns the server: a restart or a readiness blip does not hand it back.
		return v1alpha1.GameServerStateAllocated
	case pod.Spec.NodeName == "":
		return v1alpha1.GameServerStateCreating
	case podReady(pod) && configRunning:
		return v1alpha1.GameServerStateReady
	default:
		return v1alpha1.GameServerStateStarting
	}
}

// readyCondition is the GameServer's Ready condition for its state and Pod.
func readyCondition(state v1alpha1.GameServerState, pod *corev1.Pod, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: generation, Status: metav1.ConditionFalse}
	switch {
	case (state == v1alpha1.GameServerStateReady || state == v1alpha1.GameServerStateAllocated) && pod != nil && podReady(pod):
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "PodReady", "the server's Pod is ready and runs a pushed config"
	case state == v1alpha1.GameServerStateAllocated:
		c.Reason, c.Message = "PodNotReady", "the allocated server's Pod is not ready (its process may be restarting)"
	case state == v1alpha1.GameServerStateCreating:
		c.Reason, c.Message = "Creating", "the server's Pod is being created or scheduled"
	case state == v1alpha1.GameServerStateStarting:
		c.Reason, c.Message = "Starting", "the server's process is starting, waiting for its config or not ready"
	case state == v1alpha1.GameServerStateShutdown:
		c.Reason, c.Message = "Shutdown", "the server's process ended"
	default:
		c.Reason, c.Message = "Error", "the server failed"
	}
	return c
}
