package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/testenv"
)

// fleetWait bounds each wait on a fleet; a fleet of 30 servers on a loaded machine takes a few
// seconds.
const fleetWait = 50 * time.Second

// newFleet is a valid Fleet of replicas servers like newGameServer's.
func newFleet(ns, name string, replicas int32) *v1alpha1.Fleet {
	return &v1alpha1.Fleet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.FleetSpec{
			Replicas: replicas,
			Template: v1alpha1.GameServerTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"mode": "arena"}},
				Spec:       newGameServer(ns, "", v1alpha1.PortPolicyDynamic, 0).Spec,
			},
		},
	}
}

func getFleet(t testing.TB, f *v1alpha1.Fleet) *v1alpha1.Fleet {
	t.Helper()
	out := &v1alpha1.Fleet{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// fleetServers lists the fleet's GameServers straight from the API server, by name.
func fleetServers(t testing.TB, f *v1alpha1.Fleet) map[string]*v1alpha1.GameServer {
	t.Helper()
	var list v1alpha1.GameServerList
	if err := k8s.List(context.Background(), &list, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelFleet: f.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*v1alpha1.GameServer{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// fleetCounts is what a test expects of a settled fleet.
type fleetCounts struct {
	replicas, ready, allocated, updated int32
}

// createReadyFleet creates f and waits until all its servers are Ready and current, as
// waitFleet does.
func createReadyFleet(t testing.TB, f *v1alpha1.Fleet) (*v1alpha1.Fleet, map[string]*v1alpha1.GameServer) {
	t.Helper()
	if err := k8s.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	n := f.Spec.Replicas
	return waitFleet(t, f, fleetCounts{replicas: n, ready: n, updated: n})
}

// waitFleet waits until the fleet is settled at want: its status (of the current generation)
// says so, its netcode runs everywhere, and the API server holds exactly those servers.
func waitFleet(t testing.TB, f *v1alpha1.Fleet, want fleetCounts) (*v1alpha1.Fleet, map[string]*v1alpha1.GameServer) {
	t.Helper()
	var got *v1alpha1.Fleet
	var servers map[string]*v1alpha1.GameServer
	waitFor(t, fleetWait, fmt.Sprintf("fleet %s at %+v", f.Name, want), func() (bool, error) {
		got = getFleet(t, f)
		st := got.Status
		have := fleetCounts{st.Replicas, st.ReadyReplicas, st.AllocatedReplicas, st.UpdatedReplicas}
		if have != want || st.ObservedGeneration != got.Generation || st.ConfigAppliedReplicas != want.replicas {
			return false, fmt.Errorf("status %+v", st)
		}
		servers = fleetServers(t, f)
		var ready, alloc int32
		for _, gs := range servers {
			switch gs.Status.State {
			case v1alpha1.GameServerStateReady:
				ready++
			case v1alpha1.GameServerStateAllocated:
				alloc++
			}
		}
		ok := int32(len(servers)) == want.replicas && ready == want.ready && alloc == want.allocated
		return ok, fmt.Errorf("%d servers, %d Ready, %d Allocated", len(servers), ready, alloc)
	})
	return got, servers
}

// editFleet changes a Fleet's spec, retrying when the operator wrote its status meanwhile.
func editFleet(t testing.TB, f *v1alpha1.Fleet, edit func(*v1alpha1.Fleet)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		g := getFleet(t, f)
		edit(g)
		return k8s.Update(context.Background(), g)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func condition(f *v1alpha1.Fleet, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(f.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func podUID(t testing.TB, gs *v1alpha1.GameServer) types.UID {
	t.Helper()
	var pod corev1.Pod
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(gs), &pod); err != nil {
		t.Fatal(err)
	}
	return pod.UID
}

func stateOf(servers map[string]*v1alpha1.GameServer, state v1alpha1.GameServerState) []string {
	var out []string
	for name, gs := range servers {
		if gs.Status.State == state {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestFleetScaleAndReplace scales a fleet up and down (the Allocated server stays) and ends
// servers' processes: each ended server is removed and replaced.
func TestFleetScaleAndReplace(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "arena", 3)
	got, servers := createReadyFleet(t, f)
	hash, err := templateHash(&got.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	for name, gs := range servers {
		if !strings.HasPrefix(name, "arena-") || !metav1.IsControlledBy(gs, got) || gs.Labels["mode"] != "arena" ||
			gs.Labels[v1alpha1.LabelTemplateHash] != hash {
			t.Errorf("server %s: labels %v owners %+v", name, gs.Labels, gs.OwnerReferences)
		}
	}
	if got.Status.Selector != v1alpha1.LabelFleet+"=arena" || got.Status.Config != "3/3" {
		t.Errorf("selector %q config %q", got.Status.Selector, got.Status.Config)
	}
	for typ, want := range map[string]metav1.ConditionStatus{
		v1alpha1.ConditionAvailable: metav1.ConditionTrue, v1alpha1.ConditionProgressing: metav1.ConditionFalse,
		v1alpha1.ConditionConfigApplied: metav1.ConditionTrue,
	} {
		if c := condition(got, typ); c.Status != want || c.ObservedGeneration != got.Generation {
			t.Errorf("condition %s: %+v, want %s", typ, c, want)
		}
	}
	if c := condition(got, v1alpha1.ConditionConfigApplied); c.Message != "3/3 servers run the fleet's netcode" {
		t.Errorf("ConfigApplied message %q", c.Message)
	}

	editFleet(t, f, func(f *v1alpha1.Fleet) { f.Spec.Replicas = 5 })
	waitFleet(t, f, fleetCounts{replicas: 5, ready: 5, updated: 5})

	st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena"})
	if st.State != v1alpha1.AllocationAllocated {
		t.Fatalf("allocation %+v", st)
	}
	waitFleet(t, f, fleetCounts{replicas: 5, ready: 4, allocated: 1, updated: 5})

	// Scale-down below the Allocated one's count of Ready servers: it stays.
	editFleet(t, f, func(f *v1alpha1.Fleet) { f.Spec.Replicas = 2 })
	_, servers = waitFleet(t, f, fleetCounts{replicas: 2, ready: 1, allocated: 1, updated: 2})
	if alloc := stateOf(servers, v1alpha1.GameServerStateAllocated); !slices.Equal(alloc, []string{st.GameServerName}) {
		t.Fatalf("allocated %v, want %s", alloc, st.GameServerName)
	}

	// The Ready server's process exits: Shutdown, removed, replaced.
	readyName := stateOf(servers, v1alpha1.GameServerStateReady)[0]
	if err := kube.finish(ctx, types.NamespacedName{Namespace: ns, Name: readyName}, corev1.PodFailed); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fleetWait, "the ended server replaced", func() (bool, error) {
		servers = fleetServers(t, f)
		_, old := servers[readyName]
		return !old && len(stateOf(servers, v1alpha1.GameServerStateReady)) == 1, fmt.Errorf("servers %v", stateOf(servers, v1alpha1.GameServerStateReady))
	})

	// The match ends: the Allocated server shuts down and a Ready one takes its place.
	if err := kube.finish(ctx, types.NamespacedName{Namespace: ns, Name: st.GameServerName}, corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	_, servers = waitFleet(t, f, fleetCounts{replicas: 2, ready: 2, updated: 2})
	if _, ok := servers[st.GameServerName]; ok {
		t.Errorf("ended server %s still there", st.GameServerName)
	}
	waitFor(t, fleetWait, "events", func() (bool, error) {
		r := eventReasons(t, ns, "arena")
		return r["Created"] && r["Removed"] && r["Replacing"], fmt.Errorf("reasons %v", r)
	})
}

// TestFleetNetcodeInPlace edits only the netcode of a fleet with Allocated servers: every server
// runs it, in the same process of the same Pod, and stays in its state.
func TestFleetNetcodeInPlace(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "live", 4)
	createReadyFleet(t, f)
	// Two matches start, through GameServerAllocation resources.
	for i := range 2 {
		a := &v1alpha1.GameServerAllocation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("match-%d", i)},
			Spec:       v1alpha1.GameServerAllocationSpec{Fleet: "live"},
		}
		if err := k8s.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		if st := waitAllocation(t, a); st.State != v1alpha1.AllocationAllocated {
			t.Fatalf("allocation %d: %+v", i, st)
		}
	}
	_, before := waitFleet(t, f, fleetCounts{replicas: 4, ready: 2, allocated: 2, updated: 4})
	type server struct {
		pod   types.UID
		proc  *proc
		state v1alpha1.GameServerState
	}
	was := map[string]server{}
	for name, gs := range before {
		was[name] = server{pod: podUID(t, gs), proc: kube.pod(client.ObjectKeyFromObject(gs)).current(), state: gs.Status.State}
	}

	editFleet(t, f, func(f *v1alpha1.Fleet) {
		f.Spec.Template.Spec.Netcode.TickRateHz = 30
		f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 5
	})
	got, after := waitFleet(t, f, fleetCounts{replicas: 4, ready: 2, allocated: 2, updated: 4})
	if c := condition(got, v1alpha1.ConditionConfigApplied); c.Status != metav1.ConditionTrue || c.Message != "4/4 servers run the fleet's netcode" {
		t.Errorf("ConfigApplied %+v", c)
	}
	for name, gs := range after {
		w, ok := was[name]
		if !ok {
			t.Errorf("new server %s: a netcode edit must not create servers", name)
			continue
		}
		cfg, _ := w.proc.rt.current()
		if p := podUID(t, gs); p != w.pod || kube.pod(client.ObjectKeyFromObject(gs)).current() != w.proc {
			t.Errorf("%s: pod or process replaced", name)
		}
		if gs.Status.State != w.state || gs.Spec.Netcode.TickRateHz != 30 || cfg.TickRateHz != 30 || cfg.Congestion.MinSendHz != 5 ||
			gs.Status.Netcode.AppliedGeneration != gs.Generation {
			t.Errorf("%s: state %s (was %s), spec tick %d, process tick %d minSend %d, applied %d of %d", name, gs.Status.State, w.state,
				gs.Spec.Netcode.TickRateHz, cfg.TickRateHz, cfg.Congestion.MinSendHz, gs.Status.Netcode.AppliedGeneration, gs.Generation)
		}
	}
}

// TestFleetRolloutKeepsAllocated edits the pod template of a fleet with Allocated servers, under
// each strategy: the other servers are replaced by servers of the new template, the Allocated
// ones keep running in their Pods until their match ends, and only then are they replaced.
func TestFleetRolloutKeepsAllocated(t *testing.T) {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	tests := []struct {
		name     string
		strategy v1alpha1.FleetStrategy
	}{
		{name: "rolling", strategy: v1alpha1.FleetStrategy{Type: v1alpha1.FleetStrategyRollingUpdate,
			RollingUpdate: &v1alpha1.RollingUpdateFleetStrategy{MaxSurge: &one, MaxUnavailable: &zero}}},
		{name: "recreate", strategy: v1alpha1.FleetStrategy{Type: v1alpha1.FleetStrategyRecreate}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			f := newFleet(ns, "roll", 4)
			f.Spec.Strategy = tc.strategy
			_, before := createReadyFleet(t, f)
			var matches []string
			pods := map[string]types.UID{}
			for range 2 {
				st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "roll"})
				if st.State != v1alpha1.AllocationAllocated {
					t.Fatalf("allocation %+v", st)
				}
				matches = append(matches, st.GameServerName)
				pods[st.GameServerName] = podUID(t, before[st.GameServerName])
			}
			slices.Sort(matches)

			editFleet(t, f, func(f *v1alpha1.Fleet) {
				c := &f.Spec.Template.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "MAP", Value: "dust"})
			})
			got, after := waitFleet(t, f, fleetCounts{replicas: 4, ready: 2, allocated: 2, updated: 2})
			if c := condition(got, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionTrue || c.Reason != "WaitingForAllocated" {
				t.Errorf("Progressing %+v", c)
			}
			if alloc := stateOf(after, v1alpha1.GameServerStateAllocated); !slices.Equal(alloc, matches) {
				t.Fatalf("allocated %v, want %v", alloc, matches)
			}
			for _, name := range matches {
				if podUID(t, after[name]) != pods[name] {
					t.Errorf("allocated %s: pod replaced", name)
				}
			}
			for _, name := range stateOf(after, v1alpha1.GameServerStateReady) {
				if _, old := before[name]; old {
					t.Errorf("Ready %s is of the old template", name)
				}
				var pod corev1.Pod
				if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(pod.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "MAP" }) {
					t.Errorf("new server %s: pod without the new env", name)
				}
			}

			// One match ends: its server goes, a server of the new template takes its place.
			if err := kube.finish(ctx, types.NamespacedName{Namespace: ns, Name: matches[0]}, corev1.PodSucceeded); err != nil {
				t.Fatal(err)
			}
			waitFleet(t, f, fleetCounts{replicas: 4, ready: 3, allocated: 1, updated: 3})
		})
	}
}

// TestFleetScaleSubresource scales a fleet with kubectl through the scale subresource and reads
// its printer columns.
func TestFleetScaleSubresource(t *testing.T) {
	ns := newNamespace(t)
	f := newFleet(ns, "scaled", 1)
	createReadyFleet(t, f)

	kubectl(t, "scale", "-n", ns, "flt/scaled", "--replicas=3")
	if got := getFleet(t, f); got.Spec.Replicas != 3 {
		t.Fatalf("spec.replicas %d after kubectl scale", got.Spec.Replicas)
	}
	waitFleet(t, f, fleetCounts{replicas: 3, ready: 3, updated: 3})

	var scale struct {
		Spec   struct{ Replicas int32 }
		Status struct {
			Replicas int32
			Selector string
		}
	}
	if err := json.Unmarshal([]byte(kubectl(t, "get", "-n", ns, "fleet", "scaled", "--subresource=scale", "-o", "json")), &scale); err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != v1alpha1.LabelFleet+"=scaled" {
		t.Errorf("scale %+v", scale)
	}
	table := kubectl(t, "get", "-n", ns, "flt")
	for _, want := range []string{"DESIRED", "CURRENT", "READY", "ALLOCATED", "UPDATED", "PLAYERS", "CAPACITY", "CONFIG", "3/3"} {
		if !strings.Contains(table, want) {
			t.Errorf("kubectl get flt: no %q in\n%s", want, table)
		}
	}

	kubectl(t, "scale", "-n", ns, "fleet/scaled", "--replicas=0")
	waitFleet(t, f, fleetCounts{})
}

// kubectl runs the kubectl built with the test assets against the suite's API server and
// returns its output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restCfg.Host, CertificateAuthorityData: restCfg.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: restCfg.CertData, ClientKeyData: restCfg.KeyData, Token: restCfg.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)
	out, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), full...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
