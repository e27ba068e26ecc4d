//go:build linux

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/node"
)

const (
	release   = "netfleet"
	releaseNS = "netfleet-system"
	fleetNS   = "default"
	fleetName = "arena"
	replicas  = 2
)

// TestNode runs the whole tier on one node, in order: each step needs the ones before it.
func TestNode(t *testing.T) {
	before, err := hostState()
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t)
	n.hostBefore = before
	stopped := false
	defer func() {
		if !stopped {
			n.stop(t)
		}
	}()
	t.Logf("node %s at %s, state %s", n.ready["NETFLEET_DEV_NODE_NAME"], n.nodeIP, n.dir)

	steps := []struct {
		name string
		fn   func(*testing.T, *devNode)
	}{
		{"NodeRegistered", testNodeRegistered},
		{"ImagesLoaded", testImagesLoaded},
		{"ChartInstallsOperator", testChart},
		{"FleetReady", testFleetReady},
		{"EveryPodChecked", testEveryPod},
		{"BotsThroughNodeAddress", testBots},
		{"LiveNetcodeEdit", testLiveEdit},
		{"KilledContainerRestarted", testKilledContainer},
		{"FootprintVisible", testFootprintVisible},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.fn(t, n) }) {
			t.Fatalf("%s failed; the steps after it need it. netfleet-dev's output:\n%s", s.name, n.out)
		}
	}

	t.Run("StopLeavesNothing", func(t *testing.T) {
		stopped = true
		if !n.stop(t) {
			t.Fatalf("netfleet-dev did not stop within %s:\n%s", stopLimit, n.out)
		}
		if n.err != nil {
			t.Errorf("netfleet-dev exited with %v:\n%s", n.err, n.out)
		}
		if !strings.Contains(n.out.String(), "left nothing behind") {
			t.Errorf("netfleet-dev did not report a clean stop:\n%s", n.out)
		}
		left, err := node.Leftovers(n.marks)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range left {
			t.Errorf("left behind: %s", l)
		}
		after, err := hostState()
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("the machine's iptables rules, links, routes or network namespaces changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		for _, p := range []string{"/var/log/containers", "/var/lib/cni", "/var/lib/kubelet", "/etc/cni", "/opt/containerd", "/run/containerd", "/usr/libexec/kubernetes"} {
			if _, err := os.Stat(p); err == nil && !existedBefore[p] {
				t.Errorf("%s exists on the machine after the node", p)
			}
		}
		if err := os.RemoveAll(n.dir); err != nil {
			t.Errorf("remove the state directory: %v", err)
		}
	})
}

// existedBefore records the well-known paths a kubelet or containerd writes by default that
// existed before the tier ran, so the check after it blames the node only for new ones.
var existedBefore = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range []string{"/var/log/containers", "/var/lib/cni", "/var/lib/kubelet", "/etc/cni", "/opt/containerd", "/run/containerd", "/usr/libexec/kubernetes"} {
		if _, err := os.Stat(p); err == nil {
			m[p] = true
		}
	}
	return m
}()

func testNodeRegistered(t *testing.T, n *devNode) {
	var nodes corev1.NodeList
	if err := n.k8s.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("%d nodes, want 1", len(nodes.Items))
	}
	nd := nodes.Items[0]
	info := nd.Status.NodeInfo
	if info.KubeletVersion != node.KubeVersion || info.ContainerRuntimeVersion != "containerd://"+strings.TrimPrefix(node.ContainerdVersion, "v") {
		t.Errorf("kubelet %s, runtime %s", info.KubeletVersion, info.ContainerRuntimeVersion)
	}
	var internal []string
	for _, a := range nd.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
		if a.Type == corev1.NodeExternalIP {
			t.Errorf("the local node has an ExternalIP %s", a.Address)
		}
	}
	if len(internal) != 1 || internal[0] != n.nodeIP.String() {
		t.Errorf("InternalIP %v, want %s", internal, n.nodeIP)
	}
	t.Logf("node %s: kubelet %s, %s, %s", nd.Name, info.KubeletVersion, info.ContainerRuntimeVersion, info.OSImage)
}

func testImagesLoaded(t *testing.T, n *devNode) {
	out, err := run(context.Background(), append(n.ctr, "images", "ls", "-q")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"ghcr.io/netfleet/operator:" + build.tag, "ghcr.io/netfleet/gameserver:" + build.tag} {
		if !strings.Contains(out, ref+"\n") {
			t.Errorf("containerd has no %s; it has:\n%s", ref, out)
		}
	}
}

func testChart(t *testing.T, n *devNode) {
	helm := filepath.Join(build.root, "bin", "helm")
	cmd := exec.Command(helm, "install", release, filepath.Join(build.root, "charts", "netfleet"),
		"--namespace", releaseNS, "--create-namespace", "--wait", "--timeout", "3m")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+n.ready["KUBECONFIG"])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	ctx := context.Background()
	var deploy appsv1.Deployment
	if err := n.k8s.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "netfleet-operator"}, &deploy); err != nil {
		t.Fatal(err)
	}
	if deploy.Status.AvailableReplicas != *deploy.Spec.Replicas {
		t.Errorf("operator: %d of %d replicas available", deploy.Status.AvailableReplicas, *deploy.Spec.Replicas)
	}
	pods := operatorPods(t, n)
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
		if p.Spec.ServiceAccountName != "netfleet-operator" || p.Spec.Containers[0].Image != "ghcr.io/netfleet/operator:"+build.tag {
			t.Errorf("operator pod %s: service account %s, image %s", p.Name, p.Spec.ServiceAccountName, p.Spec.Containers[0].Image)
		}
	}
	// One replica leads, through the Lease, with the ServiceAccount's RBAC.
	waitFor(t, "an operator replica to hold the leader lease", waitLimit, func() (bool, error) {
		var lease coordinationv1.Lease
		if err := n.k8s.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "netfleet-operator"}, &lease); err != nil {
			return false, err
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		pod, _, _ := strings.Cut(holder, "_")
		return names[pod], fmt.Errorf("lease held by %q, operator pods %v", holder, names)
	})
}

func operatorPods(t *testing.T, n *devNode) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := n.k8s.List(context.Background(), &pods, client.InNamespace(releaseNS),
		client.MatchingLabels{"app.kubernetes.io/component": "operator"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no operator pods")
	}
	return pods.Items
}

// fleet is the tier's Fleet: the game-server image, hardened as a user's template would be.
func fleet() *v1alpha1.Fleet {
	f := &v1alpha1.Fleet{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: fleetName},
		Spec: v1alpha1.FleetSpec{
			Replicas: replicas,
			Template: v1alpha1.GameServerTemplateSpec{Spec: v1alpha1.GameServerSpec{
				Ports: []v1alpha1.GameServerPort{{Name: "game", ContainerPort: netcode.DefaultGamePort, Protocol: corev1.ProtocolUDP, PortPolicy: v1alpha1.PortPolicyDynamic}},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name: "server", Image: "ghcr.io/netfleet/gameserver:" + build.tag, ImagePullPolicy: corev1.PullIfNotPresent,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				}},
			}},
		},
	}
	f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 15
	return f
}

// server is one game server as the tier sees it.
type server struct {
	gs  v1alpha1.GameServer
	pod corev1.Pod
}

func (s server) admin() string {
	return netip.AddrPortFrom(netip.MustParseAddr(s.pod.Status.PodIP), netcode.DefaultAdminPort).String()
}

// waitConverged waits for every server of the fleet to be Ready with the fleet's netcode applied,
// and its process (asked at its admin API) to run it.
func waitConverged(t *testing.T, n *devNode) []server {
	t.Helper()
	ctx := context.Background()
	var servers []server
	waitFor(t, "fleet "+fleetName+" to converge", waitLimit, func() (bool, error) {
		f := &v1alpha1.Fleet{}
		if err := n.k8s.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: fleetName}, f); err != nil {
			return false, err
		}
		if st := f.Status; st.ObservedGeneration != f.Generation || st.ReadyReplicas != replicas || st.ConfigAppliedReplicas != replicas {
			return false, fmt.Errorf("fleet status %+v at generation %d", st, f.Generation)
		}
		var gss v1alpha1.GameServerList
		if err := n.k8s.List(ctx, &gss, client.InNamespace(fleetNS), client.MatchingLabels{v1alpha1.LabelFleet: fleetName}); err != nil {
			return false, err
		}
		if len(gss.Items) != replicas {
			return false, fmt.Errorf("%d servers", len(gss.Items))
		}
		want := f.Spec.Template.Spec.Netcode.Default().Hash()
		servers = servers[:0]
		for _, gs := range gss.Items {
			var pod corev1.Pod
			if err := n.k8s.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: gs.Name}, &pod); err != nil {
				return false, err
			}
			st := gs.Status
			if st.State != v1alpha1.GameServerStateReady || st.Netcode.AppliedGeneration != gs.Generation || st.Netcode.AppliedHash != want {
				return false, fmt.Errorf("%s: %s, applied generation %d of %d", gs.Name, st.State, st.Netcode.AppliedGeneration, gs.Generation)
			}
			s := server{gs: gs, pod: pod}
			running, err := adminStatus(s.admin())
			if err != nil {
				return false, err
			}
			if running.Hash != want || running.InstanceID != st.Netcode.InstanceID {
				return false, fmt.Errorf("%s runs hash %s instance %s; status says instance %s, want hash %s", gs.Name, running.Hash, running.InstanceID, st.Netcode.InstanceID, want)
			}
			servers = append(servers, s)
		}
		return true, nil
	})
	return servers
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// adminStatus is GET /v1/netcode of a game server: what its process runs.
func adminStatus(admin string) (netcode.ConfigStatus, error) {
	var st netcode.ConfigStatus
	resp, err := httpClient.Get("http://" + admin + netcode.PathNetcode)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s: %s", admin, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func testFleetReady(t *testing.T, n *devNode) {
	if err := n.k8s.Create(context.Background(), fleet()); err != nil {
		t.Fatal(err)
	}
	for _, s := range waitConverged(t, n) {
		t.Logf("%s: pod %s on %s, players at %s:%d", s.gs.Name, s.pod.Status.PodIP, s.pod.Spec.NodeName, s.gs.Status.Address, s.gs.Status.Port)
	}
}

// testEveryPod checks every Pod of the cluster: the operator's and the game servers'.
func testEveryPod(t *testing.T, n *devNode) {
	var pods corev1.PodList
	if err := n.k8s.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(operatorPods(t, n))+replicas {
		t.Errorf("%d pods, want the operator's and %d game servers", len(pods.Items), replicas)
	}
	for i := range pods.Items {
		n.checkPod(t, &pods.Items[i])
	}
}

// testBots connects real ENet bots to one server at its status address, which must be the node's
// address and the Pod's hostPort, and checks that they receive snapshots.
func testBots(t *testing.T, n *devNode) {
	s := waitConverged(t, n)[0]
	if s.gs.Status.Address != n.nodeIP.String() {
		t.Errorf("%s: status address %s, want the node's %s", s.gs.Name, s.gs.Status.Address, n.nodeIP)
	}
	var hostPort int32
	for _, p := range s.pod.Spec.Containers[0].Ports {
		if p.Name == "game" {
			hostPort = p.HostPort
		}
	}
	if hostPort == 0 || s.gs.Status.Port != hostPort {
		t.Fatalf("%s: status port %d, pod hostPort %d", s.gs.Name, s.gs.Status.Port, hostPort)
	}
	target := netip.AddrPortFrom(netip.MustParseAddr(s.gs.Status.Address), uint16(s.gs.Status.Port))
	swarm, err := botswarm.New(botswarm.Config{
		Server:   target,
		Classes:  []botswarm.Class{{Name: "players", Count: 2}},
		Duration: 6 * time.Second,
		Seed:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := swarm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	report := swarm.Wait()
	for _, c := range report.Clients {
		if c.State != botswarm.StateDone || c.ConnectedMs < 0 || c.Totals.Snapshots == 0 {
			t.Errorf("bot %d to %s: %s (%s), connected at %d ms, %d snapshots", c.ID, target, c.State, c.Error, c.ConnectedMs, c.Totals.Snapshots)
			continue
		}
		t.Logf("bot %d to %s: %d snapshots, %d packets", c.ID, target, c.Totals.Snapshots, c.Totals.Packets)
	}
}

// containers records each server's container ID and restart count.
func containers(servers []server) map[string][2]string {
	m := map[string][2]string{}
	for _, s := range servers {
		cs := s.pod.Status.ContainerStatuses[0]
		m[s.gs.Name] = [2]string{containerID(cs), fmt.Sprint(cs.RestartCount)}
	}
	return m
}

// testLiveEdit edits the fleet's netcode: every server runs it, in the same containers with the
// same restart counts.
func testLiveEdit(t *testing.T, n *devNode) {
	before := containers(waitConverged(t, n))
	ctx := context.Background()
	f := &v1alpha1.Fleet{}
	if err := n.k8s.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: fleetName}, f); err != nil {
		t.Fatal(err)
	}
	base := f.DeepCopy()
	f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 20
	if err := n.k8s.Patch(ctx, f, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	after := waitConverged(t, n)
	for _, s := range after {
		running, err := adminStatus(s.admin())
		if err != nil {
			t.Fatal(err)
		}
		if running.Config.Congestion.MinSendHz != 20 {
			t.Errorf("%s runs minSendHz %d, want 20", s.gs.Name, running.Config.Congestion.MinSendHz)
		}
	}
	if got := containers(after); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("containers and restart counts changed across the edit: before %v, after %v", before, got)
	}
}

// testKilledContainer kills one server's container through containerd: the kubelet restarts it,
// and the operator gives the new process the current config.
func testKilledContainer(t *testing.T, n *devNode) {
	servers := waitConverged(t, n)
	victim := servers[0]
	cs := victim.pod.Status.ContainerStatuses[0]
	oldID, oldInstance := containerID(cs), victim.gs.Status.Netcode.InstanceID
	if _, err := run(context.Background(), append(n.ctr, "tasks", "kill", "--signal", "SIGKILL", oldID)...); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, "the kubelet to restart "+victim.gs.Name, waitLimit, func() (bool, error) {
		var pod corev1.Pod
		if err := n.k8s.Get(ctx, client.ObjectKeyFromObject(&victim.pod), &pod); err != nil {
			return false, err
		}
		st := pod.Status.ContainerStatuses[0]
		return st.RestartCount == cs.RestartCount+1 && containerID(st) != oldID && st.Ready,
			fmt.Errorf("restarts %d, container %s, ready %v", st.RestartCount, containerID(st), st.Ready)
	})
	for _, s := range waitConverged(t, n) {
		if s.gs.Name != victim.gs.Name {
			continue
		}
		if s.gs.Status.Netcode.InstanceID == oldInstance {
			t.Errorf("%s reports the killed process's instance %s", s.gs.Name, oldInstance)
		}
		running, err := adminStatus(s.admin())
		if err != nil {
			t.Fatal(err)
		}
		if running.Config.Congestion.MinSendHz != 20 || running.Generation != s.gs.Generation {
			t.Errorf("the restarted %s runs generation %d minSendHz %d, want generation %d minSendHz 20",
				s.gs.Name, running.Generation, running.Config.Congestion.MinSendHz, s.gs.Generation)
		}
		t.Logf("%s: container %s killed, restarted as %s (restart %d), instance %s -> %s, config generation %d",
			s.gs.Name, oldID[:12], containerID(s.pod.Status.ContainerStatuses[0])[:12], s.pod.Status.ContainerStatuses[0].RestartCount,
			oldInstance, s.gs.Status.Netcode.InstanceID, running.Generation)
	}
}

// testFootprintVisible shows that the check StopLeavesNothing makes sees a running node: its
// processes, link, route and cgroups on the machine, and in its namespaces the mounts, the
// bridge and the iptables rules that go away with them.
func testFootprintVisible(t *testing.T, n *devNode) {
	left, err := node.Leftovers(n.marks)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, l := range left {
		kind, _, _ := strings.Cut(l, " ")
		kinds[kind] = true
	}
	for _, k := range []string{"process", "network", "route", "cgroup"} {
		if !kinds[k] {
			t.Errorf("a running node shows no %s on the machine: %v", k, left)
		}
	}
	rules, err := n.inNode("iptables-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CNI-HOSTPORT-DNAT", "KUBE-SERVICES"} {
		if !strings.Contains(rules, want) {
			t.Errorf("the node's nat table has no %s:\n%s", want, rules)
		}
	}
	during, err := hostState()
	if err != nil {
		t.Fatal(err)
	}
	if during == n.hostBefore || !strings.Contains(during, n.marks.HostLink) || !strings.Contains(during, n.marks.PodCIDR.String()) {
		t.Errorf("the machine's links and routes do not show the running node's link %s and route to %s:\n%s", n.marks.HostLink, n.marks.PodCIDR, during)
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", n.holder))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mounts), n.dir+"/") {
		t.Errorf("the node's mount namespace has no mount under %s", n.dir)
	}
}
