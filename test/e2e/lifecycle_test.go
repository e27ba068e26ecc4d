//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/examples/arena"
)

// arenaMaxPlayers is the capacity the arena servers of these tests declare.
const arenaMaxPlayers = 8

// createArenaFleet creates a Fleet of arena servers (examples/arena) of arenaMaxPlayers players.
func createArenaFleet(t *testing.T, ns, name string, replicas int32, edit func(*v1alpha1.Fleet)) {
	t.Helper()
	f := newFleet(ns, name, replicas, randomPort(40000, 10000))
	c := &f.Spec.Template.Spec.Template.Spec.Containers[0]
	c.Image, c.Args = arenaImage+":e2e", []string{"--arena-half-extent=80", fmt.Sprintf("--max-peers=%d", arenaMaxPlayers), "--log-level=debug"}
	if edit != nil {
		edit(f)
	}
	if err := env.k8s.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

// allocateWith serves one GameServerAllocation of spec and returns its result and UID.
func allocateWith(t *testing.T, ns string, spec v1alpha1.GameServerAllocationSpec) (v1alpha1.GameServerAllocationStatus, string) {
	t.Helper()
	ctx := context.Background()
	gsa := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "match-"}, Spec: spec}
	if err := env.k8s.Create(ctx, gsa); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "allocation "+gsa.Name, waitLimit, func() (bool, error) {
		if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(gsa), gsa); err != nil {
			return false, err
		}
		return gsa.Status.State != "", fmt.Errorf("no result yet")
	})
	return gsa.Status, string(gsa.UID)
}

// processLifecycle is GET /v1/lifecycle of a game server's admin API.
func processLifecycle(admin string) (netcode.LifecycleStatus, error) {
	var st netcode.LifecycleStatus
	resp, err := httpClient.Get("http://" + admin + netcode.PathLifecycle)
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s: %s", netcode.PathLifecycle, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitFleetReady waits until the Fleet's status counts n Ready servers: the operator's cache,
// which allocations are served from, shows them Ready.
func waitFleetReady(t *testing.T, ns, name string, n int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("fleet %s with %d Ready", name, n), waitLimit, func() (bool, error) {
		f := &v1alpha1.Fleet{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, f); err != nil {
			return false, err
		}
		return f.Status.ReadyReplicas == n, fmt.Errorf("fleet status %+v", f.Status)
	})
}

// getServer reads a GameServer; ok is false once it is gone.
func getServer(t *testing.T, ns, name string) (v1alpha1.GameServer, bool) {
	t.Helper()
	var gs v1alpha1.GameServer
	err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &gs)
	if apierrors.IsNotFound(err) {
		return gs, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return gs, true
}

// waitArenaCapacity waits until the servers' statuses carry the arena's capacity. The players
// come from each process's lifecycle report, which the operator may first read after the server
// is Ready.
func waitArenaCapacity(t *testing.T, ns string, servers ...server) {
	t.Helper()
	for _, s := range servers {
		waitFor(t, s.gs.Name+"'s capacity in its status", waitLimit, func() (bool, error) {
			gs, _ := getServer(t, ns, s.gs.Name)
			p := gs.Status.Players
			return p != nil && p.Capacity == arenaMaxPlayers, fmt.Errorf("players status %+v, want capacity %d", p, arenaMaxPlayers)
		})
	}
}

// TestMatchLifecycle runs arena servers through matches: the game gets its allocation's payload
// and metadata (it reports the match it read on its GameServer), ends a match and is reused, then
// ends one with Shutdown and is replaced by its Fleet.
func TestMatchLifecycle(t *testing.T) {
	ensureOperator(t)
	ns := newNamespace(t, "match")
	createArenaFleet(t, ns, "arena", 1, nil)
	first := waitConverged(t, ns, "arena")[0]
	waitArenaCapacity(t, ns, first)

	st, uid := allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{
		Fleet:    "arena",
		Metadata: &v1alpha1.AllocationMetadata{Labels: map[string]string{"mode": "duel"}, Annotations: map[string]string{"netfleet.io/match": "m-1"}},
		Payload:  `{"matchSeconds":3,"end":"ready"}`,
	})
	if st.State != v1alpha1.AllocationAllocated || st.GameServerName != first.gs.Name {
		t.Fatalf("allocation %+v", st)
	}
	// The process had the allocation before the result came out.
	if lc, err := processLifecycle(first.admin); err != nil || lc.LastAllocationUID != uid {
		t.Fatalf("the process's lifecycle %+v (%v), want allocation %s", lc, err, uid)
	}
	waitFor(t, "the game's report of its match", waitLimit, func() (bool, error) {
		gs, _ := getServer(t, ns, first.gs.Name)
		c := gs.Status.Counters
		ok := gs.Labels["mode"] == "duel" && gs.Annotations["netfleet.io/match"] == "m-1" &&
			c[arena.CounterMatches] == 1 && c[arena.CounterMatchSeconds] == 3
		return ok, fmt.Errorf("labels %v, counters %v, state %s", gs.Labels, c, gs.Status.State)
	})
	// The match ends after 3 s and the game calls Ready: the same server, the same process.
	waitFor(t, "the server reused", waitLimit, func() (bool, error) {
		gs, _ := getServer(t, ns, first.gs.Name)
		return gs.Status.State == v1alpha1.GameServerStateReady && gs.Status.Netcode.InstanceID == first.gs.Status.Netcode.InstanceID,
			fmt.Errorf("state %s", gs.Status.State)
	})
	waitFleetReady(t, ns, "arena", 1)

	st, _ = allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena", Payload: `{"matchSeconds":2,"end":"shutdown"}`})
	if st.GameServerName != first.gs.Name {
		t.Fatalf("second allocation %+v, want the reused %s", st, first.gs.Name)
	}
	waitFor(t, "the server that shut down replaced", waitLimit, func() (bool, error) {
		gs, ok := getServer(t, ns, first.gs.Name)
		servers, err := fleetServers(context.Background(), ns, "arena")
		if err != nil {
			return false, err
		}
		fresh := len(servers) == 1 && servers[0].gs.Name != first.gs.Name && servers[0].gs.Status.State == v1alpha1.GameServerStateReady
		return fresh && (!ok || gs.Status.State == v1alpha1.GameServerStateShutdown), fmt.Errorf("old %s (exists %v), %d live servers", gs.Status.State, ok, len(servers))
	})
}

// TestBackfill: allocations that ask for room for players fill a running match before they start
// another: two fit one arena server of 8, the third goes to the other server.
func TestBackfill(t *testing.T) {
	ensureOperator(t)
	ns := newNamespace(t, "backfill")
	createArenaFleet(t, ns, "arena", 2, nil)
	// An allocation that asks for room needs the servers' capacities.
	waitArenaCapacity(t, ns, waitConverged(t, ns, "arena")...)
	a, _ := allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena", PlayerRoom: 5})
	// Backfill prefers the servers the operator's cache shows Allocated: let it show this one.
	waitFor(t, "the fleet counting the allocated server", waitLimit, func() (bool, error) {
		f := &v1alpha1.Fleet{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "arena"}, f); err != nil {
			return false, err
		}
		return f.Status.AllocatedReplicas == 1, fmt.Errorf("fleet status %+v", f.Status)
	})
	b, _ := allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena", PlayerRoom: 3})
	c, _ := allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena", PlayerRoom: 1})
	if a.State != v1alpha1.AllocationAllocated || b.GameServerName != a.GameServerName || c.State != v1alpha1.AllocationAllocated || c.GameServerName == a.GameServerName {
		t.Fatalf("allocations %s, %s, %s: want the first two on one server, the third on the other", a.GameServerName, b.GameServerName, c.GameServerName)
	}
	gs, _ := getServer(t, ns, a.GameServerName)
	if p := gs.Status.Players; gs.Status.State != v1alpha1.GameServerStateAllocated || p == nil || p.Pending != 8 || p.Capacity != arenaMaxPlayers {
		t.Fatalf("the backfilled server: %s %+v", gs.Status.State, p)
	}
	// A real player connects: the room it held is its own now.
	s := byName(mustServers(t, ns, "arena"))[a.GameServerName]
	pl := newPlayer(t, s.game)
	waitFor(t, "the player counted", waitLimit, func() (bool, error) {
		pl.service(t)
		gs, _ := getServer(t, ns, a.GameServerName)
		p := gs.Status.Players
		return p != nil && p.Connected == 1 && p.Pending == 7, fmt.Errorf("players %+v", p)
	})
	waitFor(t, "the fleet's players and capacity", waitLimit, func() (bool, error) {
		pl.service(t)
		f := &v1alpha1.Fleet{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "arena"}, f); err != nil {
			return false, err
		}
		return f.Status.Players == 1 && f.Status.PlayerCapacity == 2*arenaMaxPlayers, fmt.Errorf("fleet players %d capacity %d", f.Status.Players, f.Status.PlayerCapacity)
	})
	if d, _ := allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena", PlayerRoom: 1}); d.GameServerName == a.GameServerName {
		t.Fatalf("a full server took another allocation: %+v", d)
	}
}

// TestUnhealthyReplaced: a Ready server whose process stops (SIGSTOP: it neither ticks nor
// answers) becomes Unhealthy and its Fleet replaces it.
func TestUnhealthyReplaced(t *testing.T) {
	ensureOperator(t)
	ns := newNamespace(t, "unhealthy")
	f := newFleet(ns, "sick", 2, randomPort(40000, 10000))
	f.Spec.Template.Spec.Health.UnhealthyAfterSeconds = 5
	if err := env.k8s.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	servers := waitConverged(t, ns, "sick")
	victim := servers[0]
	pid, err := victim.pid()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	sawUnhealthy := false
	waitFor(t, victim.gs.Name+" Unhealthy and replaced", waitLimit, func() (bool, error) {
		gs, ok := getServer(t, ns, victim.gs.Name)
		if ok && gs.Status.State == v1alpha1.GameServerStateUnhealthy {
			sawUnhealthy = true
		}
		live, err := fleetServers(context.Background(), ns, "sick")
		if err != nil {
			return false, err
		}
		_, stillLive := byName(live)[victim.gs.Name]
		return !stillLive && len(live) == 2, fmt.Errorf("%s: %s (exists %v), %d live servers", victim.gs.Name, gs.Status.State, ok, len(live))
	})
	if gs, ok := getServer(t, ns, victim.gs.Name); ok && gs.Status.State != v1alpha1.GameServerStateUnhealthy {
		t.Fatalf("the stopped server is %s", gs.Status.State)
	}
	// The Fleet may remove it before a read sees it: its state change's event stays.
	if !sawUnhealthy {
		waitFor(t, "the Unhealthy event of "+victim.gs.Name, waitLimit, func() (bool, error) {
			var evs eventsv1.EventList
			if err := env.k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == victim.gs.Name && e.Reason == string(v1alpha1.GameServerStateUnhealthy) {
					return true, nil
				}
			}
			return false, fmt.Errorf("%d events, none Unhealthy for %s", len(evs.Items), victim.gs.Name)
		})
	}
	waitConverged(t, ns, "sick")
}

// TestOperatorRestartMidMatch: a match ends while the operator is down; the operator that
// starts again sees the process Ready and makes the server Ready, and it takes the next match.
func TestOperatorRestartMidMatch(t *testing.T) {
	ensureOperator(t)
	ns := newNamespace(t, "opdown")
	createArenaFleet(t, ns, "arena", 1, nil)
	s := waitConverged(t, ns, "arena")[0]
	st, uid := allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena", Payload: `{"matchSeconds":3,"end":"ready"}`})
	if st.GameServerName != s.gs.Name {
		t.Fatalf("%+v", st)
	}
	if err := env.operator.kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the match over in the process", waitLimit, func() (bool, error) {
		lc, err := processLifecycle(s.admin)
		return err == nil && lc.State == netcode.LifecycleReady && lc.LastAllocationUID == uid, fmt.Errorf("lifecycle %+v (%w)", lc, err)
	})
	if gs, _ := getServer(t, ns, s.gs.Name); gs.Status.State != v1alpha1.GameServerStateAllocated {
		t.Fatalf("with the operator down the server is %s", gs.Status.State)
	}
	ensureOperator(t)
	waitFor(t, "the server Ready after the restart", waitLimit, func() (bool, error) {
		gs, _ := getServer(t, ns, s.gs.Name)
		return gs.Status.State == v1alpha1.GameServerStateReady, fmt.Errorf("state %s", gs.Status.State)
	})
	waitFleetReady(t, ns, "arena", 1)
	if st, _ := allocateWith(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "arena"}); st.GameServerName != s.gs.Name {
		t.Fatalf("the next match went to %q, want %s", st.GameServerName, s.gs.Name)
	}
}
