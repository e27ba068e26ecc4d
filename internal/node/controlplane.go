package node

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Users of the node's components: the names and groups the Node authorizer and the bootstrap RBAC
// bindings (system:node-proxier, system:kube-scheduler, system:kube-controller-manager) expect.
var (
	kubeletUser   = envtest.User{Name: "system:node:" + NodeName, Groups: []string{"system:nodes"}}
	proxyUser     = envtest.User{Name: "system:kube-proxy"}
	schedulerUser = envtest.User{Name: "system:kube-scheduler"}
	managerUser   = envtest.User{Name: "system:kube-controller-manager"}
)

// controlPlaneEnvironment returns the envtest environment of the node's API server: it listens on
// the machine's end of the node's link (the kubelet and the Pods reach it there), serves a
// certificate that also names the kubernetes Service's address (the Pods' in-cluster clients
// dial that), authenticates clients by the node's CA, authorizes the kubelet with the Node
// authorizer and NodeRestriction, and admits Pods through the ServiceAccount plugin, which mounts
// their tokens.
func (n *Node) controlPlaneEnvironment() (*envtest.Environment, error) {
	l, p := n.layout, n.plan
	caFile := filepath.Join(l.pki, "ca.crt")
	if err := os.WriteFile(caFile, n.ca.certPEM, 0o644); err != nil {
		return nil, err
	}
	serving, err := n.ca.serving("kube-apiserver",
		[]net.IP{p.hostIP.AsSlice(), p.serviceIP.AsSlice(), net.IPv4(127, 0, 0, 1)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, err
	}
	// envtest serves the certificate it finds in its directory rather than making its own.
	certFile, keyFile, err := serving.write(l.apiserverCerts, "apiserver")
	if err != nil {
		return nil, err
	}
	kubeletClient, err := n.ca.client("kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	kcCert, kcKey, err := kubeletClient.write(l.pki, "apiserver-kubelet-client")
	if err != nil {
		return nil, err
	}
	saSigning, saVerifying, err := serviceAccountKey(l.pki)
	if err != nil {
		return nil, err
	}
	port, err := freePort(p.hostIP.String())
	if err != nil {
		return nil, err
	}

	env := &envtest.Environment{
		BinaryAssetsDirectory: n.opts.Assets.ControlPlane,
		CRDDirectoryPaths:     n.opts.CRDDirs,
		ErrorIfCRDPathMissing: len(n.opts.CRDDirs) > 0,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: l.etcd}
	api := env.ControlPlane.GetAPIServer()
	api.CertDir = l.apiserverCerts
	api.ListenAddr = envtest.ListenAddr{Address: p.hostIP.String(), Port: strconv.Itoa(port)}
	api.CA = n.ca.certPEM
	api.Authn = &certAuthn{ca: n.ca, caFile: caFile}
	api.Out, api.Err = nil, nil
	args := api.Configure()
	args.Set("tls-cert-file", certFile).
		Set("tls-private-key-file", keyFile).
		Set("service-account-key-file", saVerifying).
		Set("service-account-signing-key-file", saSigning).
		Set("service-cluster-ip-range", p.serviceCIDR.String()).
		Set("authorization-mode", "Node,RBAC").
		Set("enable-admission-plugins", "NodeRestriction").
		Set("kubelet-client-certificate", kcCert).
		Set("kubelet-client-key", kcKey).
		Set("kubelet-preferred-address-types", "InternalIP").
		Set("advertise-address", p.hostIP.String())
	args.Disable("disable-admission-plugins")
	return env, nil
}

// freePort returns a TCP port free on addr.
func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("pick a port on %s: %w", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeKubeconfig provisions user and writes its kubeconfig as <kubeconfigs>/<name>.
func (n *Node) writeKubeconfig(name string, user envtest.User) (string, error) {
	u, err := n.env.ControlPlane.AddUser(user, &rest.Config{})
	if err != nil {
		return "", fmt.Errorf("user %s: %w", user.Name, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %w", user.Name, err)
	}
	path := filepath.Join(n.layout.kubeconfigs, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// startScheduler starts kube-scheduler, which binds Pods to the node.
func (n *Node) startScheduler() (*process, error) {
	kc, err := n.writeKubeconfig("kube-scheduler", schedulerUser)
	if err != nil {
		return nil, err
	}
	return n.startProcess("kube-scheduler", onHost, filepath.Join(n.opts.Assets.Kubernetes, "kube-scheduler"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
}

// startControllerManager starts kube-controller-manager as kubeadm runs it (each controller with
// its own ServiceAccount's credentials): Deployments, ReplicaSets, the garbage collector,
// namespaces, ServiceAccounts, the kube-root-ca.crt ConfigMaps the Pods' token volumes project,
// EndpointSlices for kube-proxy.
func (n *Node) startControllerManager() (*process, error) {
	kc, err := n.writeKubeconfig("kube-controller-manager", managerUser)
	if err != nil {
		return nil, err
	}
	l := n.layout
	return n.startProcess("kube-controller-manager", onHost, filepath.Join(n.opts.Assets.Kubernetes, "kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--use-service-account-credentials=true",
		"--root-ca-file="+filepath.Join(l.pki, "ca.crt"),
		"--service-account-private-key-file="+filepath.Join(l.pki, "sa.key"),
		"--cluster-cidr="+n.plan.podCIDR.String(), "--allocate-node-cidrs=false",
		"--service-cluster-ip-range="+n.plan.serviceCIDR.String(),
		// The kubelet's volume plugin directory, in the state directory: left at its default, the
		// controller manager (which runs on the machine, not in the node's mount namespace)
		// creates /usr/libexec/kubernetes on the machine.
		"--flex-volume-plugin-dir="+l.kubeletVolumePlugins,
		"--controllers=*,-certificatesigningrequest-signing-controller,-certificatesigningrequest-approving-controller,-node-ipam-controller")
}
