package podrunner

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensureNode makes sure the Node of addr exists and reports addr as its InternalIP and itself
// Ready. Nodes are kept after their Pods are gone, to be reused with their address.
func (r *Runner) ensureNode(ctx context.Context, name string, addr netip.Addr) error {
	node := &corev1.Node{}
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, node)
	if apierrors.IsNotFound(err) {
		node = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   runtime.GOOS,
				corev1.LabelArchStable: runtime.GOARCH,
			}},
		}
		setNodeStatus(&node.Status, addr, time.Now())
		err = r.client.Create(ctx, node)
		if apierrors.IsAlreadyExists(err) {
			err = r.client.Get(ctx, client.ObjectKey{Name: name}, node)
		}
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	if nodeServes(&node.Status, addr) {
		return nil
	}
	base := node.DeepCopy()
	setNodeStatus(&node.Status, addr, time.Now())
	if err := r.client.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("node %s: status: %w", name, err)
	}
	return nil
}

// nodeServes reports whether a Node's status names addr as its InternalIP and the Node Ready.
func nodeServes(st *corev1.NodeStatus, addr netip.Addr) bool {
	internal := false
	for _, a := range st.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address == addr.String() {
			internal = true
		}
	}
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return internal && c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setNodeStatus(st *corev1.NodeStatus, addr netip.Addr, now time.Time) {
	st.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr.String()}}
	// One Pod per node: its address is the Pod's.
	st.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	st.Allocatable = st.Capacity
	st.NodeInfo.OperatingSystem, st.NodeInfo.Architecture = runtime.GOOS, runtime.GOARCH
	st.Conditions = []corev1.NodeCondition{{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionTrue,
		Reason:             "KubeletReady",
		Message:            "the local pod runner serves this address",
		LastHeartbeatTime:  stamp(now),
		LastTransitionTime: stamp(now),
	}}
}

// bind binds pod to node through the binding subresource, as the scheduler does. The UID guards
// against a Pod of the same name that replaced it.
func (r *Runner) bind(ctx context.Context, pod *corev1.Pod, node string) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := r.client.SubResource("binding").Create(ctx, pod, b); err != nil {
		return fmt.Errorf("bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, node, err)
	}
	return nil
}
