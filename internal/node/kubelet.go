package node

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// kubeletConfig is the KubeletConfiguration of the node.
func (n *Node) kubeletConfig(servingCert, servingKey string) ([]byte, error) {
	l := n.layout
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// The machines netfleet is developed on have the cgroup v1 hierarchy, which kubelet 1.35
		// and later refuse unless told otherwise.
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               "/" + n.plan.cgroup,
		"cgroupsPerQOS":            true,
		"enforceNodeAllocatable":   []string{"pods"},
		"containerRuntimeEndpoint": "unix://" + l.containerdSock,
		"address":                  n.plan.nodeIP.String(),
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"tlsCertFile":              servingCert,
		"tlsPrivateKeyFile":        servingKey,
		"authentication": map[string]any{
			"anonymous": map[string]bool{"enabled": false},
			"webhook":   map[string]bool{"enabled": true},
			"x509":      map[string]string{"clientCAFile": filepath.Join(l.pki, "ca.crt")},
		},
		"authorization":       map[string]string{"mode": "Webhook"},
		"podLogsDir":          l.kubeletPodLogs,
		"volumePluginDir":     l.kubeletVolumePlugins,
		"failSwapOn":          false,
		"resolvConf":          "/etc/resolv.conf",
		"serializeImagePulls": false,
		// The images were loaded, not pulled, and cannot be pulled again: never collect them.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// A development machine's disk is often fuller than a node's; evict on what would break.
		"evictionHard": map[string]string{
			"memory.available": "100Mi", "nodefs.available": "512Mi", "imagefs.available": "512Mi",
		},
		"nodeStatusReportFrequency": "10s",
		"syncFrequency":             "10s",
	}
	return yaml.Marshal(cfg)
}

// startKubelet starts the kubelet in the node, registered as NodeName with the node's address.
func (n *Node) startKubelet() (*process, error) {
	l := n.layout
	serving, err := n.ca.serving(NodeName, []net.IP{n.plan.nodeIP.AsSlice()}, []string{NodeName})
	if err != nil {
		return nil, err
	}
	cert, key, err := serving.write(l.pki, "kubelet-serving")
	if err != nil {
		return nil, err
	}
	cfg, err := n.kubeletConfig(cert, key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(l.kubeletConfig, cfg, 0o644); err != nil {
		return nil, err
	}
	kc, err := n.writeKubeconfig("kubelet", kubeletUser)
	if err != nil {
		return nil, err
	}
	return n.startProcess("kubelet", inNode, filepath.Join(n.opts.Assets.Kubernetes, "kubelet"),
		"--config="+l.kubeletConfig, "--kubeconfig="+kc, "--root-dir="+l.kubeletRoot,
		"--hostname-override="+NodeName, "--node-ip="+n.plan.nodeIP.String(), "--v=1")
}

// startKubeProxy starts kube-proxy in the node (iptables mode): Service addresses, the
// kubernetes Service's above all, which the Pods' in-cluster clients dial. It leaves the machine's
// conntrack settings alone.
func (n *Node) startKubeProxy() (*process, error) {
	kc, err := n.writeKubeconfig("kube-proxy", proxyUser)
	if err != nil {
		return nil, err
	}
	cfg, err := yaml.Marshal(map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]string{"kubeconfig": kc},
		"mode":               "iptables",
		"hostnameOverride":   NodeName,
		"clusterCIDR":        n.plan.podCIDR.String(),
		"bindAddress":        n.plan.nodeIP.String(),
		"healthzBindAddress": "127.0.0.1:10256",
		"metricsBindAddress": "127.0.0.1:10249",
		"conntrack": map[string]any{
			"maxPerCore": 0, "min": 0,
			"tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s",
			"udpTimeout": "0s", "udpStreamTimeout": "0s",
		},
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.layout.kubeProxyConfig, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("kube-proxy config: %w", err)
	}
	return n.startProcess("kube-proxy", inNode, filepath.Join(n.opts.Assets.Kubernetes, "kube-proxy"),
		"--config="+n.layout.kubeProxyConfig, "--v=1")
}
