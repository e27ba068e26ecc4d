// Package node runs a real Kubernetes node on the machine for netfleet's local control plane
// (`netfleet-dev --node`): etcd and kube-apiserver (through envtest), kube-controller-manager and
// kube-scheduler, and, in network and mount namespaces of the node's own, containerd with runc,
// the kubelet registered as a Node of that API server, kube-proxy, and the CNI bridge, host-local
// and portmap plugins, so Pods run from images loaded into containerd (no registry) and reach
// players through the node's address and their hostPorts.
//
// Everything lives under one state directory: the node's mount namespace overlays the machine's
// /etc, /opt, /run, /usr and /var with layers in it, shadows the kernel settings the kubelet would
// change, and keeps every mount the node makes to itself; every process is in a cgroup of the
// node's; the Pod network is a bridge in the node's network namespace, joined to the machine by
// one veth pair, with no route off the machine. Stop stops it all and checks with Leftovers that
// no process, mount, namespace, link, route or cgroup of it remains.
//
// It needs root, the cgroup v1 hierarchy, overlayfs, veth and iptables' nat table, and the
// binaries `make node-assets test-assets` builds; Start says which is missing. It imports
// nothing from netfleet but internal/images.
package node
