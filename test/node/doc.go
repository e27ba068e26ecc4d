// Package node is netfleet's real-node end-to-end tier: `netfleet-dev --node` runs the control
// plane and a real node (containerd with runc, the kubelet, kube-proxy, CNI bridge and portmap),
// the images `make images` builds are loaded into containerd, the Helm chart installs the
// operator as a Pod, and a Fleet of game-server Pods plays: ENet bots reach a server through the
// node's address and hostPort, a live netcode edit and a container killed by the runtime are
// watched on the real Pods, every Pod's probes, security context and token are checked, and
// stopping the node must leave nothing on the machine.
//
// It needs root, the cgroup v1 hierarchy, and `make node-assets test-assets tools` (make test
// does it); without them it fails, saying what is missing.
package node
