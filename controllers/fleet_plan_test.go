package controllers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

const (
	stReady     = v1alpha1.GameServerStateReady
	stAllocated = v1alpha1.GameServerStateAllocated
	stStarting  = v1alpha1.GameServerStateStarting
	stCreating  = v1alpha1.GameServerStateCreating
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// srv is a server for the plan tests: current or not, in a state, created at t0+age seconds.
func srv(name string, current bool, state v1alpha1.GameServerState, age int) fleetServer {
	return fleetServer{name: name, current: current, state: state, created: t0.Add(time.Duration(age) * time.Second)}
}

func rolling(surge, unavailable intstr.IntOrString) v1alpha1.FleetStrategy {
	return v1alpha1.FleetStrategy{Type: v1alpha1.FleetStrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateFleetStrategy{
		MaxSurge: &surge, MaxUnavailable: &unavailable,
	}}
}

var recreate = v1alpha1.FleetStrategy{Type: v1alpha1.FleetStrategyRecreate}

func TestPlanFleet(t *testing.T) {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	tests := []struct {
		name     string
		replicas int
		strategy v1alpha1.FleetStrategy
		servers  []fleetServer
		create   int
		remove   []string
	}{
		{name: "steady", replicas: 3, servers: []fleetServer{
			srv("a", true, stReady, 1), srv("b", true, stReady, 2), srv("c", true, stAllocated, 3),
		}},
		{name: "scale up from nothing", replicas: 3, create: 3},
		{name: "replace an ended server", replicas: 3, servers: []fleetServer{
			srv("a", true, stReady, 1), srv("b", true, stAllocated, 2),
		}, create: 1},
		{name: "scale down: Ready first, newest first, then Starting, never Allocated", replicas: 2, servers: []fleetServer{
			srv("ready-old", true, stReady, 1), srv("ready-new", true, stReady, 5), srv("starting", true, stStarting, 6),
			srv("creating", true, stCreating, 7), srv("alloc", true, stAllocated, 0),
		}, remove: []string{"ready-new", "ready-old", "starting"}},
		{name: "scale down Creating before nothing else is left", replicas: 1, servers: []fleetServer{
			srv("creating", true, stCreating, 7), srv("empty-state", true, "", 8), srv("alloc", true, stAllocated, 0),
		}, remove: []string{"empty-state", "creating"}},
		{name: "scale to zero keeps Allocated", replicas: 0, servers: []fleetServer{
			srv("a", true, stAllocated, 1), srv("b", true, stAllocated, 2), srv("c", true, stReady, 3),
		}, remove: []string{"c"}},
		{name: "more Allocated than replicas", replicas: 1, servers: []fleetServer{
			srv("a", true, stAllocated, 1), srv("b", false, stAllocated, 2),
		}},
		{name: "rolling: surge one, take one down", replicas: 4, strategy: rolling(one, one), servers: []fleetServer{
			srv("o1", false, stReady, 1), srv("o2", false, stReady, 2), srv("o3", false, stReady, 3), srv("o4", false, stReady, 4),
		}, create: 1, remove: []string{"o4"}},
		{name: "rolling: no surge waits for new servers to come up", replicas: 4, strategy: rolling(one, zero), servers: []fleetServer{
			srv("o1", false, stReady, 1), srv("o2", false, stReady, 2), srv("o3", false, stReady, 3), srv("o4", false, stReady, 4),
			srv("n1", true, stStarting, 5),
		}},
		{name: "rolling: a new server up frees one old", replicas: 4, strategy: rolling(one, zero), servers: []fleetServer{
			srv("o1", false, stReady, 1), srv("o2", false, stReady, 2), srv("o3", false, stReady, 3), srv("o4", false, stReady, 4),
			srv("n1", true, stReady, 5),
		}, remove: []string{"o4"}},
		{name: "rolling: old servers that are down go first", replicas: 4, strategy: rolling(one, zero), servers: []fleetServer{
			srv("o1", false, stReady, 1), srv("o2", false, stReady, 2), srv("o3", false, stStarting, 3), srv("o4", false, stReady, 4),
			srv("n1", true, stReady, 5),
		}, remove: []string{"o3"}},
		{name: "rolling: old Allocated stay and count", replicas: 4, strategy: rolling(one, one), servers: []fleetServer{
			srv("o1", false, stAllocated, 1), srv("o2", false, stAllocated, 2), srv("o3", false, stAllocated, 3), srv("o4", false, stReady, 4),
		}, create: 1, remove: []string{"o4"}},
		{name: "rolling: only old Allocated left", replicas: 3, strategy: rolling(one, one), servers: []fleetServer{
			srv("o1", false, stAllocated, 1), srv("o2", false, stAllocated, 2), srv("n1", true, stReady, 3),
		}},
		{name: "rolling: an old Allocated server ended", replicas: 3, strategy: rolling(one, one), servers: []fleetServer{
			srv("o1", false, stAllocated, 1), srv("n1", true, stReady, 3),
		}, create: 1},
		{name: "rolling: both bounds zero still moves", replicas: 2, strategy: rolling(zero, zero), servers: []fleetServer{
			srv("o1", false, stReady, 1), srv("o2", false, stReady, 2),
		}, remove: []string{"o2"}},
		{name: "rolling: default 25% of 10 is surge 3, unavailable 2", replicas: 10, servers: []fleetServer{
			srv("o0", false, stReady, 0), srv("o1", false, stReady, 1), srv("o2", false, stReady, 2), srv("o3", false, stReady, 3),
			srv("o4", false, stReady, 4), srv("o5", false, stReady, 5), srv("o6", false, stReady, 6), srv("o7", false, stReady, 7),
			srv("o8", false, stReady, 8), srv("o9", false, stReady, 9),
		}, create: 3, remove: []string{"o9", "o8"}},
		{name: "rolling while scaling down", replicas: 2, strategy: rolling(one, one), servers: []fleetServer{
			srv("o1", false, stReady, 1), srv("o2", false, stReady, 2), srv("n1", true, stReady, 3), srv("n2", true, stReady, 4),
			srv("n3", true, stReady, 5),
		}, remove: []string{"n3", "o2", "o1"}},
		{name: "recreate: old ones not Allocated go first", replicas: 3, strategy: recreate, servers: []fleetServer{
			srv("o1", false, stReady, 1), srv("o2", false, stStarting, 2), srv("o3", false, stAllocated, 3),
		}, remove: []string{"o1", "o2"}},
		{name: "recreate: then the new ones", replicas: 3, strategy: recreate, servers: []fleetServer{
			srv("o3", false, stAllocated, 3),
		}, create: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planFleet(tc.replicas, tc.strategy, tc.servers)
			if err != nil {
				t.Fatal(err)
			}
			var removed []string
			for _, i := range plan.remove {
				removed = append(removed, tc.servers[i].name)
			}
			if plan.create != tc.create || !slices.Equal(removed, tc.remove) {
				t.Errorf("create %d remove %v, want create %d remove %v", plan.create, removed, tc.create, tc.remove)
			}
		})
	}
}

func TestRolloutBounds(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	tests := []struct {
		name                   string
		strategy               v1alpha1.FleetStrategy
		replicas               int
		surge, unavailable     int
		wantErr                bool
		rollingUpdateUnchanged bool
	}{
		{name: "defaults", replicas: 10, surge: 3, unavailable: 2},
		{name: "defaults of one", replicas: 1, surge: 1, unavailable: 0},
		{name: "numbers", replicas: 10, strategy: v1alpha1.FleetStrategy{RollingUpdate: &v1alpha1.RollingUpdateFleetStrategy{MaxSurge: num(2), MaxUnavailable: num(0)}}, surge: 2},
		{name: "unavailable capped at replicas", replicas: 3, strategy: v1alpha1.FleetStrategy{RollingUpdate: &v1alpha1.RollingUpdateFleetStrategy{MaxUnavailable: num(9)}}, surge: 1, unavailable: 3},
		{name: "both zero", replicas: 10, strategy: v1alpha1.FleetStrategy{RollingUpdate: &v1alpha1.RollingUpdateFleetStrategy{MaxSurge: pct("0%"), MaxUnavailable: num(0)}}, unavailable: 1},
		{name: "recreate", replicas: 5, strategy: recreate, unavailable: 5},
		{name: "malformed", replicas: 5, strategy: v1alpha1.FleetStrategy{RollingUpdate: &v1alpha1.RollingUpdateFleetStrategy{MaxSurge: pct("lots")}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			surge, unavailable, err := rolloutBounds(tc.strategy, tc.replicas)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (surge != tc.surge || unavailable != tc.unavailable) {
				t.Errorf("surge %d unavailable %d, want %d %d", surge, unavailable, tc.surge, tc.unavailable)
			}
		})
	}
}

// TestPlanFleetConverges drives random fleets through random rollouts and scalings with a
// model of the servers (new ones come up a step later, Ready ones get stAllocated, Allocated ones
// end) and checks the invariants of every step and where each run ends.
func TestPlanFleetConverges(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			replicas := rng.IntN(12)
			strategy := rolling(intstr.FromInt(rng.IntN(3)), intstr.FromInt(rng.IntN(3)))
			if rng.IntN(4) == 0 {
				strategy = recreate
			}
			surge, unavailable, err := rolloutBounds(strategy, replicas)
			if err != nil {
				t.Fatal(err)
			}
			var servers []fleetServer
			for i := range rng.IntN(15) {
				st := stReady
				if rng.IntN(3) == 0 {
					st = stAllocated
				}
				servers = append(servers, srv(fmt.Sprintf("old-%d", i), false, st, i))
			}
			next := 100
			for step := 0; ; step++ {
				if step == 200 {
					t.Fatalf("no convergence: %d servers", len(servers))
				}
				plan, err := planFleet(replicas, strategy, servers)
				if err != nil {
					t.Fatal(err)
				}
				upBefore := 0
				for _, s := range servers {
					if s.up() {
						upBefore++
					}
				}
				oldUpRemoved := false
				for _, i := range plan.remove {
					if servers[i].state == stAllocated {
						t.Fatalf("step %d removes Allocated %s", step, servers[i].name)
					}
					oldUpRemoved = oldUpRemoved || (!servers[i].current && servers[i].up())
				}
				servers = slices.DeleteFunc(servers, func(s fleetServer) bool {
					return slices.ContainsFunc(plan.remove, func(i int) bool { return servers[i].name == s.name })
				})
				up := 0
				for _, s := range servers {
					if s.up() {
						up++
					}
				}
				// A rolling update takes an older server that is up only while enough stay up.
				if strategy.Type != v1alpha1.FleetStrategyRecreate && oldUpRemoved && up < replicas-unavailable {
					t.Fatalf("step %d: %d up after removals, had %d, min %d", step, up, upBefore, replicas-unavailable)
				}
				if plan.create > 0 && len(servers)+plan.create > max(replicas+surge, len(servers)) {
					t.Fatalf("step %d: %d servers after creating %d, more than %d", step, len(servers)+plan.create, plan.create, replicas+surge)
				}
				changed := plan.create > 0 || len(plan.remove) > 0
				// The world moves: servers come up, some get stAllocated, some matches end.
				for i := range servers {
					switch {
					case servers[i].state == stCreating:
						servers[i].state = stReady
						changed = true
					case servers[i].state == stReady && rng.IntN(8) == 0 && step < 20:
						servers[i].state = stAllocated
						changed = true
					}
				}
				if step < 30 && len(servers) > 0 && rng.IntN(4) == 0 {
					i := rng.IntN(len(servers))
					if servers[i].state == stAllocated {
						servers = slices.Delete(servers, i, i+1)
						changed = true
					}
				}
				for range plan.create {
					servers = append(servers, srv(fmt.Sprintf("new-%d", next), true, stCreating, next))
					next++
				}
				if !changed && step > 30 {
					break
				}
			}
			alloc, total := 0, len(servers)
			for _, s := range servers {
				if s.state == stAllocated {
					alloc++
				} else if !s.current {
					t.Errorf("older server %s (%s) left after the rollout", s.name, s.state)
				}
			}
			if total != max(replicas, alloc) {
				t.Errorf("%d servers (%d Allocated), want %d", total, alloc, max(replicas, alloc))
			}
		})
	}
}

func TestTemplateHash(t *testing.T) {
	base := v1alpha1.GameServerTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"mode": "arena"}},
		Spec:       newGameServer("ns", "x", v1alpha1.PortPolicyDynamic, 0).Spec,
	}
	h0, err := templateHash(&base)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*v1alpha1.GameServerTemplateSpec)
		same bool
	}{
		{name: "netcode", same: true, edit: func(s *v1alpha1.GameServerTemplateSpec) { s.Spec.Netcode.TickRateHz = 30 }},
		{name: "image", edit: func(s *v1alpha1.GameServerTemplateSpec) { s.Spec.Template.Spec.Containers[0].Image = "v2" }},
		{name: "env", edit: func(s *v1alpha1.GameServerTemplateSpec) {
			s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MAP", Value: "dust"}}
		}},
		{name: "ports", edit: func(s *v1alpha1.GameServerTemplateSpec) { s.Spec.Ports[0].ContainerPort = 7000 }},
		{name: "labels", edit: func(s *v1alpha1.GameServerTemplateSpec) { s.Labels["mode"] = "duel" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base.DeepCopy()
			tc.edit(c)
			h, err := templateHash(c)
			if err != nil {
				t.Fatal(err)
			}
			if (h == h0) != tc.same || len(h) != 10 {
				t.Errorf("hash %s, base %s, want same %v", h, h0, tc.same)
			}
		})
	}
}
