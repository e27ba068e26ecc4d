//go:build linux

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// waitFor polls cond every 100 ms until it holds, failing the test after limit with cond's last
// error, which says what is still missing.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s: %v", what, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newNamespace creates a namespace for one test. At cleanup the test's FleetAutoscalers, Fleets
// and GameServers are deleted and the test waits until their Pods' processes are gone, so the next
// test starts on a quiet machine.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, rand.IntN(1e6))
	ctx := context.Background()
	if err := env.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{&v1alpha1.FleetAutoscaler{}, &v1alpha1.Fleet{}, &v1alpha1.GameServer{}} {
			if err := env.k8s.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
				t.Errorf("clean up %s: %v", ns, err)
			}
		}
		waitFor(t, "the test's pods gone", waitLimit, func() (bool, error) {
			var pods corev1.PodList
			if err := env.k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				return false, err
			}
			return len(pods.Items) == 0, fmt.Errorf("%d pods left", len(pods.Items))
		})
	})
	return ns
}

// serverArgs keep a test server small: a small world, few peer slots, every log line.
var serverArgs = []string{"--world-population=100", "--world-half-extent=300", "--max-peers=32", "--log-level=debug"}

// newFleet is a Fleet of small game servers with a Dynamic game port and the given admin port
// (each Pod has its own loopback address, so all of them can use it).
func newFleet(ns, name string, replicas int32, adminPort int32) *v1alpha1.Fleet {
	return &v1alpha1.Fleet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.FleetSpec{
			Replicas: replicas,
			Template: v1alpha1.GameServerTemplateSpec{Spec: v1alpha1.GameServerSpec{
				Ports: []v1alpha1.GameServerPort{{
					Name: "game", ContainerPort: netcode.DefaultGamePort, Protocol: corev1.ProtocolUDP, PortPolicy: v1alpha1.PortPolicyDynamic,
				}},
				AdminPort: adminPort,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "server", Image: gameServerImage + ":e2e", Args: append([]string(nil), serverArgs...),
				}}}},
			}},
		},
	}
}

// createFleet creates a Fleet with an admin port picked at random for the test.
func createFleet(t *testing.T, ns, name string, replicas int32) *v1alpha1.Fleet {
	t.Helper()
	f := newFleet(ns, name, replicas, randomPort(40000, 10000))
	if err := env.k8s.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

// updateFleet applies mutate to the Fleet's newest version until the update goes through,
// riding out conflicts and an API server that is coming back.
func updateFleet(t *testing.T, ns, name string, mutate func(*v1alpha1.Fleet)) *v1alpha1.Fleet {
	t.Helper()
	f := &v1alpha1.Fleet{}
	// Conflicts, and whatever an API server that is coming back answers, are tried again; a
	// refusal of the object itself is not.
	retriable := func(err error) bool {
		return !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err)
	}
	backoff := retry.DefaultBackoff
	backoff.Steps, backoff.Cap = 100, time.Second
	err := retry.OnError(backoff, retriable, func() error {
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, f); err != nil {
			return err
		}
		mutate(f)
		return env.k8s.Update(context.Background(), f)
	})
	if err != nil {
		t.Fatalf("update fleet %s: %v", name, err)
	}
	return f
}

// server is one GameServer with its Pod, as the tests reach it.
type server struct {
	gs    v1alpha1.GameServer
	pod   corev1.Pod
	admin string         // podIP:adminPort
	game  netip.AddrPort // where players connect
}

// pid is the process id of the server's game-server process, from its container id.
func (s *server) pid() (int, error) {
	cs := s.pod.Status.ContainerStatuses
	if len(cs) == 0 {
		return 0, fmt.Errorf("pod %s has no container status", s.pod.Name)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(cs[0].ContainerID, "local://"))
	if err != nil {
		return 0, fmt.Errorf("pod %s: container id %q: %w", s.pod.Name, cs[0].ContainerID, err)
	}
	return pid, nil
}

// fleetServers returns the Fleet's servers that have not ended, with their Pods.
func fleetServers(ctx context.Context, ns, fleet string) ([]server, error) {
	var list v1alpha1.GameServerList
	if err := env.k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelFleet: fleet}); err != nil {
		return nil, err
	}
	var out []server
	for _, gs := range list.Items {
		if gs.Status.State.IsFinal() || gs.DeletionTimestamp != nil {
			continue
		}
		s := server{gs: gs}
		if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(&gs), &s.pod); err != nil {
			return nil, fmt.Errorf("pod of %s: %w", gs.Name, err)
		}
		s.admin = net.JoinHostPort(s.pod.Status.PodIP, strconv.Itoa(int(gs.Spec.AdminPort)))
		if gs.Status.Address != "" {
			game, err := netip.ParseAddrPort(net.JoinHostPort(gs.Status.Address, strconv.Itoa(int(gs.Status.Port))))
			if err != nil {
				return nil, fmt.Errorf("address of %s: %w", gs.Name, err)
			}
			s.game = game
		}
		out = append(out, s)
	}
	return out, nil
}

// waitConverged waits until the Fleet has done all it can for its spec: status observed, every
// server up (Ready or Allocated), of the fleet's netcode, running it per its status, and every
// process answering that it runs it. It returns the servers.
func waitConverged(t *testing.T, ns, name string) []server {
	t.Helper()
	var servers []server
	waitFor(t, "fleet "+name+" converged", waitLimit, func() (bool, error) {
		ctx := context.Background()
		f := &v1alpha1.Fleet{}
		if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, f); err != nil {
			return false, err
		}
		st := f.Status
		if st.ObservedGeneration != f.Generation || st.Replicas != f.Spec.Replicas || st.ConfigAppliedReplicas != f.Spec.Replicas ||
			st.ReadyReplicas+st.AllocatedReplicas != f.Spec.Replicas {
			return false, fmt.Errorf("fleet status %+v at generation %d", st, f.Generation)
		}
		var err error
		if servers, err = fleetServers(ctx, ns, name); err != nil {
			return false, err
		}
		if len(servers) != int(f.Spec.Replicas) {
			return false, fmt.Errorf("%d servers, want %d", len(servers), f.Spec.Replicas)
		}
		want := f.Spec.Template.Spec.Netcode.Default().Hash()
		for _, s := range servers {
			if err := runsDesired(s.gs, want); err != nil {
				return false, err
			}
			if !s.pod.Status.ContainerStatuses[0].Ready {
				return false, fmt.Errorf("pod %s is not ready", s.pod.Name)
			}
			running, err := adminStatus(s.admin)
			if err != nil {
				return false, err
			}
			if running.Generation != s.gs.Generation || running.Hash != want || running.InstanceID != s.gs.Status.Netcode.InstanceID {
				return false, fmt.Errorf("%s runs generation %d hash %s instance %s; its status says generation %d instance %s, want hash %s",
					s.gs.Name, running.Generation, running.Hash, running.InstanceID, s.gs.Generation, s.gs.Status.Netcode.InstanceID, want)
			}
		}
		return true, nil
	})
	return servers
}

// runsDesired checks, from its status, that a server is up and runs its spec's netcode, whose hash
// must be fleetHash.
func runsDesired(gs v1alpha1.GameServer, fleetHash string) error {
	st := gs.Status
	switch {
	case st.State != v1alpha1.GameServerStateReady && st.State != v1alpha1.GameServerStateAllocated:
		return fmt.Errorf("%s is %q", gs.Name, st.State)
	case gs.Spec.Netcode.Default().Hash() != fleetHash:
		return fmt.Errorf("%s has another netcode than its fleet", gs.Name)
	case st.Netcode.AppliedGeneration != gs.Generation || st.Netcode.AppliedHash != fleetHash:
		return fmt.Errorf("%s: applied generation %d (hash %s), at generation %d", gs.Name, st.Netcode.AppliedGeneration, st.Netcode.AppliedHash, gs.Generation)
	}
	return nil
}

// allocate takes one Ready server of the fleet through a GameServerAllocation and returns its
// name.
func allocate(t *testing.T, ns, fleet string) string {
	t.Helper()
	ctx := context.Background()
	gsa := &v1alpha1.GameServerAllocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "match-"},
		Spec:       v1alpha1.GameServerAllocationSpec{Fleet: fleet},
	}
	if err := env.k8s.Create(ctx, gsa); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "allocation "+gsa.Name, waitLimit, func() (bool, error) {
		if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(gsa), gsa); err != nil {
			return false, err
		}
		return gsa.Status.State != "", fmt.Errorf("no result yet")
	})
	if gsa.Status.State != v1alpha1.AllocationAllocated {
		t.Fatalf("allocation %s: %s (%s: %s)", gsa.Name, gsa.Status.State, gsa.Status.Reason, gsa.Status.Message)
	}
	return gsa.Status.GameServerName
}

// adminStatus is GET /v1/netcode of a game server's admin API: what its process runs.
func adminStatus(admin string) (netcode.ConfigStatus, error) { return getStatus(httpClient, admin) }

// byName indexes servers by GameServer name.
func byName(servers []server) map[string]server {
	m := make(map[string]server, len(servers))
	for _, s := range servers {
		m[s.gs.Name] = s
	}
	return m
}
