package controllers

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// nextState is the GameServer state machine (see v1alpha1.GameServerState): the state a server in
// state cur moves to, given its Pod (nil when there is none) and whether its current process runs
// a config the operator pushed. It is pure, so every transition is tested without an API server.
func nextState(cur v1alpha1.GameServerState, pod *corev1.Pod, configRunning bool) v1alpha1.GameServerState {
	if cur.IsFinal() {
		return cur
	}
	wasUp := cur == v1alpha1.GameServerStateReady || cur == v1alpha1.GameServerStateAllocated || cur == v1alpha1.GameServerStateReserved
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
	case state == v1alpha1.GameServerStateReserved:
		c.Reason, c.Message = "Reserved", "the game holds the server back from allocation for a while"
	case (state == v1alpha1.GameServerStateReady || state == v1alpha1.GameServerStateAllocated) && pod != nil && podReady(pod):
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "PodReady", "the server's Pod is ready and runs a pushed config"
	case state == v1alpha1.GameServerStateAllocated:
		c.Reason, c.Message = "PodNotReady", "the allocated server's Pod is not ready (its process may be restarting)"
	case state == v1alpha1.GameServerStateCreating:
		c.Reason, c.Message = "Creating", "the server's Pod is being created or scheduled"
	case state == v1alpha1.GameServerStateStarting:
		c.Reason, c.Message = "Starting", "the server's process is starting, waiting for its config or not ready"
	case state == v1alpha1.GameServerStateShutdown:
		c.Reason, c.Message = "Shutdown", "the game shut down or the server's process ended"
	case state == v1alpha1.GameServerStateUnhealthy:
		c.Reason, c.Message = "Unhealthy", "the server stopped passing its health check"
	default:
		c.Reason, c.Message = "Error", "the server failed"
	}
	return c
}

// lifecycleState is the state of a server whose Pod gives it state next (nextState), given what
// its process reports of its lifecycle (nil before the first answer). allocatedBy is the
// server's status.allocatedBy, and up says its Pod is ready and runs a pushed config. An
// Allocated server's match has ended when its process is Ready (or Reserved) again after the
// very allocation that marked the server; a process that has not received that allocation yet
// is still being delivered to, and the server stays Allocated. It is pure.
func lifecycleState(next v1alpha1.GameServerState, obs *netcode.LifecycleStatus, allocatedBy string, up bool) v1alpha1.GameServerState {
	if next.IsFinal() || obs == nil {
		return next
	}
	free := obs.State == netcode.LifecycleReady || obs.State == netcode.LifecycleReserved
	switch {
	case obs.State == netcode.LifecycleShutdown:
		return v1alpha1.GameServerStateShutdown
	case next == v1alpha1.GameServerStateAllocated && free && obs.LastAllocationUID != "" && obs.LastAllocationUID == allocatedBy:
		if !up {
			return v1alpha1.GameServerStateStarting
		}
		if obs.State == netcode.LifecycleReserved {
			return v1alpha1.GameServerStateReserved
		}
		return v1alpha1.GameServerStateReady
	case next == v1alpha1.GameServerStateReady && obs.State == netcode.LifecycleReserved:
		return v1alpha1.GameServerStateReserved
	}
	return next
}

// healthState is the state of a server in state that has (or has not) passed its health check
// in time: an unhealthy server is Unhealthy, except an Allocated one that the spec keeps.
func healthState(state v1alpha1.GameServerState, unhealthy bool, h v1alpha1.GameServerHealth) v1alpha1.GameServerState {
	switch {
	case !unhealthy || h.Disabled || state.IsFinal() || state == v1alpha1.GameServerStateCreating:
		return state
	case state == v1alpha1.GameServerStateAllocated && !h.ReplaceAllocated:
		return state
	}
	return v1alpha1.GameServerStateUnhealthy
}

// playersStatus is the server's players status after an answer of its process (obs, nil when
// none came): the connected players and the capacity as the process reports them, and the room
// allocations hold, less the players that connected since the last answer. The held room is
// released at its deadline and when the match ends (ended). It is pure.
func playersStatus(prev *v1alpha1.GameServerPlayers, obs *netcode.LifecycleStatus, ended bool, now time.Time) *v1alpha1.GameServerPlayers {
	p := v1alpha1.GameServerPlayers{}
	if prev != nil {
		p = *prev.DeepCopy()
	}
	if obs != nil {
		if arrived := obs.Players - p.Connected; arrived > 0 {
			p.Pending = max(0, p.Pending-arrived)
		}
		p.Connected, p.Capacity = obs.Players, obs.Capacity
	}
	if ended || p.Pending == 0 || p.PendingUntil != nil && !now.Before(p.PendingUntil.Time) {
		p.Pending, p.PendingUntil = 0, nil
	}
	if p == (v1alpha1.GameServerPlayers{}) {
		return nil
	}
	return &p
}

// roomFor is the room a server has for new players, and whether it declared a capacity.
func roomFor(gs *v1alpha1.GameServer) (int32, bool) {
	p := gs.Status.Players
	if p == nil || p.Capacity == 0 {
		return 0, false
	}
	return p.Capacity - p.Connected - p.Pending, true
}

// applyLifecycleStatus copies what the process reports besides its state into the status.
func applyLifecycleStatus(st *v1alpha1.GameServerStatus, obs *netcode.LifecycleStatus) {
	if obs == nil {
		return
	}
	st.Counters = maps.Clone(obs.Counters)
	st.ReservedUntil = nil
	if st.State == v1alpha1.GameServerStateReserved && !obs.ReservedUntil.IsZero() {
		t := metav1.NewTime(obs.ReservedUntil)
		st.ReservedUntil = &t
	}
}
