package controllers

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

const (
	// adminPortName names the admin API's container port.
	adminPortName = "admin"
	// defaultBindAddress is what the game server listens on unless the template says otherwise.
	defaultBindAddress = "0.0.0.0"
)

// gameContainerIndex returns the index of the game-server container in the template: the one
// named by spec.container, else the first.
func gameContainerIndex(gs *v1alpha1.GameServer) (int, error) {
	cs := gs.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return 0, fmt.Errorf("spec.template.spec.containers is empty")
	}
	if gs.Spec.Container == "" {
		return 0, nil
	}
	for i := range cs {
		if cs[i].Name == gs.Spec.Container {
			return i, nil
		}
	}
	return 0, fmt.Errorf("spec.container %q names no container of spec.template", gs.Spec.Container)
}

// adminPort returns the admin API port, defaulted as the CRD defaults it.
func adminPort(gs *v1alpha1.GameServer) int32 {
	if gs.Spec.AdminPort == 0 {
		return netcode.DefaultAdminPort
	}
	return gs.Spec.AdminPort
}

// buildPod returns the game server's Pod: the template, named after the GameServer and labeled
// with it (and with its fleet, if any), with the game-server container given the game ports
// (hostPorts holds the host port of each Static or Dynamic port by name), the admin port, the
// NETFLEET_* environment and a readiness probe on /readyz. The owner reference is the caller's
// to set.
func buildPod(gs *v1alpha1.GameServer, hostPorts map[string]int32) (*corev1.Pod, error) {
	if len(gs.Spec.Ports) == 0 {
		return nil, fmt.Errorf("spec.ports is empty")
	}
	idx, err := gameContainerIndex(gs)
	if err != nil {
		return nil, err
	}
	tmpl := gs.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace = gs.Name, gs.Namespace
	pod.GenerateName, pod.ResourceVersion, pod.UID = "", "", ""
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[v1alpha1.LabelGameServer] = gs.Name
	// The fleet label lets a scrape config label the Pod's metrics with its fleet
	// (docs/observability.md).
	if fleet, ok := gs.Labels[v1alpha1.LabelFleet]; ok {
		pod.Labels[v1alpha1.LabelFleet] = fleet
	}

	c := &pod.Spec.Containers[idx]
	admin := adminPort(gs)
	ports := make([]corev1.ContainerPort, 0, len(gs.Spec.Ports)+1)
	for _, p := range gs.Spec.Ports {
		cp := corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: protocolOf(p)}
		if p.PortPolicy != v1alpha1.PortPolicyNone {
			hp, ok := hostPorts[p.Name]
			if !ok {
				return nil, fmt.Errorf("no host port for port %q", p.Name)
			}
			cp.HostPort = hp
		}
		ports = append(ports, cp)
	}
	ports = append(ports, corev1.ContainerPort{Name: adminPortName, ContainerPort: admin, Protocol: corev1.ProtocolTCP})
	// The template's own ports stay unless netfleet defines the same name or number.
	for _, tp := range c.Ports {
		if !portClash(ports, tp) {
			ports = append(ports, tp)
		}
	}
	c.Ports = ports

	game := gs.Spec.Ports[0]
	setEnv(c, corev1.EnvVar{Name: netcode.EnvAdminPort, Value: strconv.Itoa(int(admin))})
	setEnv(c, corev1.EnvVar{Name: netcode.EnvGamePort, Value: strconv.Itoa(int(game.ContainerPort))})
	if !hasEnv(c, netcode.EnvBindAddress) {
		setEnv(c, corev1.EnvVar{Name: netcode.EnvBindAddress, Value: defaultBindAddress})
	}
	// The token reaches the process only by reference; the Pod never holds its value.
	setEnv(c, corev1.EnvVar{Name: netcode.EnvAdminToken, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: AdminTokenSecretName},
			Key:                  AdminTokenSecretKey,
		},
	}})
	if c.ReadinessProbe == nil {
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: netcode.PathReadyz, Port: intstr.FromInt32(admin), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds:    2,
			TimeoutSeconds:   1,
			FailureThreshold: 3,
		}
	}
	return pod, nil
}

func protocolOf(p v1alpha1.GameServerPort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolUDP
	}
	return p.Protocol
}

func portClash(ports []corev1.ContainerPort, p corev1.ContainerPort) bool {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	for _, q := range ports {
		if (p.Name != "" && q.Name == p.Name) || (q.ContainerPort == p.ContainerPort && q.Protocol == proto) {
			return true
		}
	}
	return false
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// setEnv sets an environment variable, replacing the template's entry of that name.
func setEnv(c *corev1.Container, v corev1.EnvVar) {
	for i := range c.Env {
		if c.Env[i].Name == v.Name {
			c.Env[i] = v
			return
		}
	}
	c.Env = append(c.Env, v)
}

// gamePortAt returns the game port (the first of spec.ports) as the Pod exposes it: its host port
// (0 if none) and container port.
func gamePortAt(gs *v1alpha1.GameServer, pod *corev1.Pod) (hostPort, containerPort int32) {
	if len(gs.Spec.Ports) == 0 {
		return 0, 0
	}
	game := gs.Spec.Ports[0]
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == game.Name {
				return p.HostPort, p.ContainerPort
			}
		}
	}
	return 0, game.ContainerPort
}

// podReady reports the Pod's Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podRestarts sums the restart counts of the Pod's containers; a bump means a process restarted.
func podRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, cs := range pod.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}
