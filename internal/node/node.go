package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Timeouts of a node's start and stop: hang guards for a loaded 2-core machine.
const (
	startTimeout    = 3 * time.Minute
	processGrace    = 10 * time.Second
	podDrainTimeout = 2 * time.Minute
	killTimeout     = 20 * time.Second
)

// Node is a running local node and its control plane.
type Node struct {
	opts   Options
	plan   plan
	layout layout
	ca     *authority
	host   *host
	env    *envtest.Environment
	cfg    *rest.Config
	// control plane and node processes, in start order
	procs      []*process
	kubeconfig string
}

// Info describes a running node for its users (netfleet-dev's ready file, the tests).
type Info struct {
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// APIServer is the API server's URL, on the machine's end of the node's link.
	APIServer string `json:"apiServer"`
	// NodeName and NodeIP are the Node's name and InternalIP: players reach hostPorts there.
	NodeName string     `json:"nodeName"`
	NodeIP   netip.Addr `json:"nodeIP"`
	// PodCIDR and ServiceCIDR are the Pods' and Services' ranges.
	PodCIDR     netip.Prefix `json:"podCIDR"`
	ServiceCIDR netip.Prefix `json:"serviceCIDR"`
	// HolderPID is a process in the node's namespaces: nsenter --target it --mount --net runs a
	// command as the node's processes see the machine.
	HolderPID int `json:"holderPID"`
	// Containerd is containerd's socket; Ctr its client.
	Containerd string `json:"containerd"`
	Ctr        string `json:"ctr"`
	// Marks identify what the node puts on the machine (Leftovers).
	Marks Marks `json:"marks"`
}

func (n *Node) logf(format string, args ...any) {
	if n.opts.Logf != nil {
		n.opts.Logf(format, args...)
	}
}

// Start starts a node: it checks the machine, makes the node's namespaces, cgroups and link,
// starts etcd and kube-apiserver (with opts.CRDDirs), kube-controller-manager, kube-scheduler,
// containerd with the image archives loaded, the kubelet, and kube-proxy, and returns once the
// Node is Ready and its Service network programmed. On error, what it started is stopped.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := preflight(ctx, opts); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, layout: newLayout(opts.Dir)}
	for _, d := range n.layout.dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	if err := sweepKilled(n.logf); err != nil {
		return nil, err
	}
	if n.plan, err = pickPlan(); err != nil {
		return nil, err
	}
	if err := createCgroups(n.plan.cgroup); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop(context.Background()))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	if err := n.setUpHost(ctx); err != nil {
		return n, err
	}
	n.logf("node namespaces up (holder pid %d); link %s %s <-> node %s; Pods %s", n.host.holder.Process.Pid, n.plan.hostLink, n.plan.hostIP, n.plan.nodeIP, n.plan.podCIDR)

	if n.ca, err = newAuthority(); err != nil {
		return n, err
	}
	if n.env, err = n.controlPlaneEnvironment(); err != nil {
		return n, err
	}
	began := time.Now()
	if n.cfg, err = n.env.Start(); err != nil {
		return n, fmt.Errorf("start etcd and kube-apiserver: %w", err)
	}
	n.logf("API server %s up in %s", n.cfg.Host, time.Since(began).Round(100*time.Millisecond))
	if err := adoptChildren(n.plan.cgroup, "etcd", "kube-apiserver"); err != nil {
		return n, err
	}
	n.kubeconfig = filepath.Join(n.opts.Dir, "kubeconfig")
	if err := os.WriteFile(n.kubeconfig, n.env.KubeConfig, 0o600); err != nil {
		return n, err
	}

	for _, start := range []func() (*process, error){n.startControllerManager, n.startScheduler} {
		p, err := start()
		if err != nil {
			return n, err
		}
		n.procs = append(n.procs, p)
	}
	containerd, err := n.startContainerd(ctx)
	if containerd != nil {
		n.procs = append(n.procs, containerd)
	}
	if err != nil {
		return n, err
	}
	kubelet, err := n.startKubelet()
	if err != nil {
		return n, err
	}
	n.procs = append(n.procs, kubelet)
	proxy, err := n.startKubeProxy()
	if err != nil {
		return n, err
	}
	n.procs = append(n.procs, proxy)
	if err := n.waitReady(ctx); err != nil {
		return n, err
	}
	n.logf("node %s Ready at %s in %s", NodeName, n.plan.nodeIP, time.Since(began).Round(100*time.Millisecond))
	return n, nil
}

// preflight checks what the node needs from the machine, saying what is missing.
func preflight(ctx context.Context, opts Options) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	for _, tool := range []string{"nsenter", "unshare", "ip", "mount", "iptables", "iptables-restore", "sleep"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not on PATH (Debian's util-linux, iproute2 and iptables have them; `make deps node-assets` installs them)", tool)
		}
	}
	out, err := run(ctx, commandTimeout, opts.Assets.Runc, "--version")
	if err != nil {
		return fmt.Errorf("runc does not run: %w", err)
	}
	if !strings.HasPrefix(out, "runc version") {
		return fmt.Errorf("%s --version printed %q, not runc's version", opts.Assets.Runc, out)
	}
	fsList, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(string(fsList)), "overlay") {
		return errors.New("the kernel has no overlayfs (containerd's snapshotter and the node's view of the machine need it)")
	}
	return checkCgroups()
}

// waitReady waits for the Node to be Ready, the controller manager to have made the default
// ServiceAccount and the kube-root-ca.crt ConfigMap of namespace default (a Pod's token volume
// needs both), and kube-proxy to have programmed the kubernetes Service.
func (n *Node) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(n.cfg)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "the Node to be Ready", startTimeout, n.procs, func() (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Errorf("condition Ready is %s: %s", c.Status, c.Message)
			}
		}
		return false, errors.New("no Ready condition")
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, "the default ServiceAccount and kube-root-ca.crt", startTimeout, n.procs, func() (bool, error) {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		return err
	}
	return waitFor(ctx, "kube-proxy to program the kubernetes Service", startTimeout, n.procs, func() (bool, error) {
		out, err := n.inNode(ctx, "iptables", "-t", "nat", "-S", "KUBE-SERVICES")
		return err == nil && strings.Contains(out, n.plan.serviceIP.String()+"/32"), err
	})
}

// Config returns the admin's client configuration.
func (n *Node) Config() *rest.Config { return rest.CopyConfig(n.cfg) }

// Info describes the running node.
func (n *Node) Info() Info {
	return Info{
		Kubeconfig:  n.kubeconfig,
		APIServer:   n.cfg.Host,
		NodeName:    NodeName,
		NodeIP:      n.plan.nodeIP,
		PodCIDR:     n.plan.podCIDR,
		ServiceCIDR: n.plan.serviceCIDR,
		HolderPID:   n.host.holder.Process.Pid,
		Containerd:  n.layout.containerdSock,
		Ctr:         filepath.Join(n.opts.Assets.Containerd, "ctr"),
		Marks:       n.marks(),
	}
}

func (n *Node) marks() Marks {
	m := Marks{Dir: filepath.Clean(n.opts.Dir), Cgroup: n.plan.cgroup, HostLink: n.plan.hostLink, PodCIDR: n.plan.podCIDR}
	if n.host != nil {
		m.NetNS, m.MountNS = n.host.netNS, n.host.mountNS
	}
	return m
}

// Failed returns an error once a process of the node has exited; it never returns for a healthy
// node until ctx is done.
func (n *Node) Failed(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for _, p := range n.procs {
			if p.exited() {
				return p.failure()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Stop stops the node and checks that it left nothing on the machine: the scheduler and the
// controller manager first (nothing is scheduled or recreated any more), then every Pod through
// the API server, gracefully (the kubelet stops its containers and tears down their network),
// kube-proxy, the kubelet and containerd, then whatever is still in the node's cgroups (the
// shims), the API server and etcd, the namespaces, and the cgroups. The state directory stays.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	byName := map[string]*process{}
	for _, p := range n.procs {
		byName[p.name] = p
	}
	for _, name := range []string{"kube-scheduler", "kube-controller-manager"} {
		if p := byName[name]; p != nil {
			p.stop(processGrace)
		}
	}
	if n.cfg != nil && byName["kubelet"] != nil && !byName["kubelet"].exited() {
		if err := n.drain(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range []string{"kube-proxy", "kubelet", "containerd"} {
		if p := byName[name]; p != nil {
			p.stop(processGrace)
		}
	}
	if n.env != nil {
		if err := n.env.Stop(); err != nil && !strings.HasPrefix(err.Error(), "timeout waiting for process") {
			errs = append(errs, fmt.Errorf("stop kube-apiserver and etcd: %w", err))
		}
	}
	if err := killCgroups(n.plan.cgroup, killTimeout); err != nil {
		errs = append(errs, err)
	}
	n.stopHost()
	// The holder was the last process; nothing can be left in the cgroups now.
	if err := killCgroups(n.plan.cgroup, killTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(n.plan.cgroup, killTimeout); err != nil {
		errs = append(errs, err)
	}
	left, err := Leftovers(n.marks())
	if err != nil {
		errs = append(errs, err)
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("the node left on the machine:\n  %s", strings.Join(left, "\n  ")))
	}
	return errors.Join(errs...)
}

// drain deletes every Pod bound to the node, each with its grace period, and waits until the
// kubelet has stopped them all.
func (n *Node) drain(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(n.cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, podDrainTimeout)
	defer cancel()
	onNode := func() ([]corev1.Pod, error) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + NodeName})
		if err != nil {
			return nil, err
		}
		return pods.Items, nil
	}
	pods, err := onNode()
	if err != nil {
		return fmt.Errorf("drain: list pods: %w", err)
	}
	for _, p := range pods {
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("drain: delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	n.logf("stopping %d pods", len(pods))
	return waitFor(ctx, "the node's pods to stop", podDrainTimeout, nil, func() (bool, error) {
		left, err := onNode()
		if err != nil {
			return false, err
		}
		names := make([]string, len(left))
		for i, p := range left {
			names[i] = p.Namespace + "/" + p.Name
		}
		return len(left) == 0, fmt.Errorf("still running: %v", names)
	})
}
