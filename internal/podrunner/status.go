package podrunner

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podPhase is the kubelet's phase rule: Pending while a container waits to start for the first
// time; Running while one runs or a stopped one will be restarted; once all have stopped for
// good, Succeeded if all exited 0, else Failed.
func podPhase(policy corev1.RestartPolicy, statuses []corev1.ContainerStatus) corev1.PodPhase {
	var running, stopped, succeeded, waiting int
	for _, s := range statuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil && s.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0 || len(statuses) == 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case policy == corev1.RestartPolicyAlways:
		return corev1.PodRunning
	case stopped == succeeded:
		return corev1.PodSucceeded
	case policy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	default:
		// OnFailure: the failed containers are restarted.
		return corev1.PodRunning
	}
}

// podConditions returns the conditions the kubelet owns (PodScheduled, Initialized,
// ContainersReady, Ready) merged into old: a condition keeps its transition time while its status
// stays, and conditions of other types are kept.
func podConditions(old []corev1.PodCondition, pod *corev1.Pod, phase corev1.PodPhase, statuses []corev1.ContainerStatus, now metav1.Time) []corev1.PodCondition {
	var unready []string
	for _, s := range statuses {
		if !s.Ready {
			unready = append(unready, s.Name)
		}
	}
	containersReady := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
	switch {
	case phase == corev1.PodSucceeded || phase == corev1.PodFailed:
		containersReady.Status, containersReady.Reason = corev1.ConditionFalse, "PodCompleted"
	case len(unready) > 0:
		containersReady.Status, containersReady.Reason = corev1.ConditionFalse, "ContainersNotReady"
		containersReady.Message = fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	}
	ready := containersReady
	ready.Type = corev1.PodReady
	if ready.Status == corev1.ConditionTrue {
		// Readiness gates are conditions that others set; the Pod is ready only with all true.
		var gates []string
		for _, g := range pod.Spec.ReadinessGates {
			if c := findCondition(old, g.ConditionType); c == nil || c.Status != corev1.ConditionTrue {
				gates = append(gates, string(g.ConditionType))
			}
		}
		if len(gates) > 0 {
			ready.Status, ready.Reason = corev1.ConditionFalse, "ReadinessGatesNotReady"
			ready.Message = fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist or is not true", strings.Join(gates, ", "))
		}
	}
	own := []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		containersReady,
		ready,
	}
	// Own conditions replace theirs in place, so the list keeps its order across reports.
	out := append([]corev1.PodCondition(nil), old...)
	for _, c := range own {
		c.LastTransitionTime = now
		prev := findCondition(out, c.Type)
		if prev == nil {
			out = append(out, c)
			continue
		}
		if prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
			c.LastProbeTime = prev.LastProbeTime
		}
		*prev = c
	}
	return out
}

func findCondition(cs []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// stamp is a status time: whole seconds, as the API stores them, so that what the runner
// computes compares equal to what it reads back.
func stamp(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second))
}

// restartBackoff is the wait before the n-th restart (n from 0) of a crash-looping container.
func restartBackoff(n int, maxBackoff time.Duration) time.Duration {
	d := firstRestartBackoff
	for range n {
		if d >= maxBackoff {
			break
		}
		d *= 2
	}
	return min(d, maxBackoff)
}
