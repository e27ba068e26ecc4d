package node

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
)

// NodeName is the name the kubelet registers its Node under.
const NodeName = "netfleet-node"

// plan is one node's addresses and names. Its index i picks them, so that nodes on one machine do
// not collide:
//
//	link between the machine and the node  10.251.i.0/30: the machine .1 (the API server
//	                                       listens there), the node .2 (its InternalIP)
//	Pods (the CNI bridge in the node)      10.252.i.0/24, gateway .1
//	Services (kube-proxy in the node)      10.253.i.0/24
//
// None of them is routed off the machine: the node's network namespace has no default route, and
// the machine routes only the Pod range, to the node.
type plan struct {
	index       int
	hostIP      netip.Addr
	nodeIP      netip.Addr
	linkPrefix  netip.Prefix
	podCIDR     netip.Prefix
	podGateway  netip.Addr
	serviceCIDR netip.Prefix
	serviceIP   netip.Addr // the kubernetes Service's, the range's first
	hostLink    string     // the machine's end of the veth pair
	cgroup      string     // the node's cgroup under every hierarchy
}

func newPlan(i int) plan {
	b := byte(i)
	return plan{
		index:       i,
		hostIP:      netip.AddrFrom4([4]byte{10, 251, b, 1}),
		nodeIP:      netip.AddrFrom4([4]byte{10, 251, b, 2}),
		linkPrefix:  netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 251, b, 0}), 30),
		podCIDR:     netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 252, b, 0}), 24),
		podGateway:  netip.AddrFrom4([4]byte{10, 252, b, 1}),
		serviceCIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 253, b, 0}), 24),
		serviceIP:   netip.AddrFrom4([4]byte{10, 253, b, 1}),
		hostLink:    fmt.Sprintf("nfnode%d", i),
		cgroup:      fmt.Sprintf("netfleet-node-%d", i),
	}
}

// pickPlan returns the plan of a free index: no interface of the machine has an address in its
// ranges, its link name and cgroup are unused.
func pickPlan() (plan, error) {
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return plan{}, fmt.Errorf("list addresses: %w", err)
	}
	var used []netip.Prefix
	for _, a := range ifaces {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			used = append(used, p)
		}
	}
	start := rand.IntN(250)
	for k := range 250 {
		p := newPlan(1 + (start+k)%250)
		if p.free(used) {
			return p, nil
		}
	}
	return plan{}, fmt.Errorf("no free node address range in 10.251-253.0.0/16")
}

func (p plan) free(used []netip.Prefix) bool {
	for _, u := range used {
		for _, mine := range []netip.Prefix{p.linkPrefix, p.podCIDR, p.serviceCIDR} {
			if u.Overlaps(mine) {
				return false
			}
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", p.hostLink)); err == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(cgroupRoot, "freezer", p.cgroup))
	return os.IsNotExist(err)
}

// layout is where a node keeps its files in its state directory.
type layout struct {
	pki, apiserverCerts, etcd, kubeconfigs, logs, images                              string
	containerdRoot, containerdState, containerdSock, containerdConfig, runcRoot       string
	cniConf, cniIPAM                                                                  string
	kubeletRoot, kubeletConfig, kubeletPodLogs, kubeletVolumePlugins, kubeProxyConfig string
	overlays, sysctls                                                                 string
}

func newLayout(dir string) layout {
	j := func(p ...string) string { return filepath.Join(append([]string{dir}, p...)...) }
	return layout{
		pki:                  j("pki"),
		apiserverCerts:       j("apiserver"),
		etcd:                 j("etcd"),
		kubeconfigs:          j("kubeconfigs"),
		logs:                 j("logs"),
		images:               j("images"),
		containerdRoot:       j("containerd", "root"),
		containerdState:      j("containerd", "state"),
		containerdSock:       j("containerd", "containerd.sock"),
		containerdConfig:     j("containerd", "config.toml"),
		runcRoot:             j("containerd", "runc"),
		cniConf:              j("cni", "net.d"),
		cniIPAM:              j("cni", "ipam"),
		kubeletRoot:          j("kubelet", "root"),
		kubeletConfig:        j("kubelet", "config.yaml"),
		kubeletPodLogs:       j("kubelet", "pod-logs"),
		kubeletVolumePlugins: j("kubelet", "volume-plugins"),
		kubeProxyConfig:      j("kube-proxy", "config.yaml"),
		overlays:             j("host"),
		sysctls:              j("host", "sysctl"),
	}
}

func (l layout) dirs() []string {
	return []string{l.pki, l.apiserverCerts, l.etcd, l.kubeconfigs, l.logs, l.images, l.containerdRoot, l.containerdState,
		l.runcRoot, l.cniConf, l.cniIPAM, l.kubeletRoot, l.kubeletPodLogs, l.kubeletVolumePlugins,
		filepath.Dir(l.kubeProxyConfig), l.overlays, l.sysctls}
}
