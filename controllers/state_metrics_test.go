package controllers

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestStateCollector: GameServers are counted by namespace, fleet and state with every state
// present, a GameServer without a state counts as Creating, every Fleet exports its desired
// and config-applied replicas, and every FleetAutoscaler its current and desired replicas.
func TestStateCollector(t *testing.T) {
	gs := func(ns, name, fleet string, state v1alpha1.GameServerState) client.Object {
		o := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if fleet != "" {
			o.Labels = map[string]string{v1alpha1.LabelFleet: fleet}
		}
		o.Status.State = state
		return o
	}
	withPlayers := func(o client.Object, connected, capacity int32) client.Object {
		o.(*v1alpha1.GameServer).Status.Players = &v1alpha1.GameServerPlayers{Connected: connected, Capacity: capacity}
		return o
	}
	fleet := func(ns, name string, replicas, applied int32) client.Object {
		f := &v1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		f.Spec.Replicas = replicas
		f.Status.ConfigAppliedReplicas = applied
		return f
	}
	autoscaler := func(ns, name, fleet string, current, desired int32) client.Object {
		a := &v1alpha1.FleetAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		a.Spec.FleetName = fleet
		a.Status.CurrentReplicas, a.Status.DesiredReplicas = current, desired
		return a
	}
	tests := []struct {
		name    string
		objects []client.Object
		want    string
	}{
		{name: "empty", want: ""},
		{
			name: "fleets and a standalone server",
			objects: []client.Object{
				fleet("games", "arena", 3, 2),
				gs("games", "arena-a", "arena", v1alpha1.GameServerStateReady),
				withPlayers(gs("games", "arena-b", "arena", v1alpha1.GameServerStateAllocated), 5, 16),
				withPlayers(gs("games", "arena-d", "arena", v1alpha1.GameServerStateShutdown), 9, 16),
				gs("games", "arena-c", "arena", ""),
				gs("games", "solo", "", v1alpha1.GameServerStateError),
				autoscaler("games", "arena-buffer", "arena", 3, 4),
			},
			want: `
# HELP netfleet_operator_fleet_config_applied_replicas A Fleet's GameServers that run the Fleet's desired netcode config (status.configAppliedReplicas).
# TYPE netfleet_operator_fleet_config_applied_replicas gauge
netfleet_operator_fleet_config_applied_replicas{fleet="arena",namespace="games"} 2
# HELP netfleet_operator_fleet_desired_replicas A Fleet's desired replicas (spec.replicas).
# TYPE netfleet_operator_fleet_desired_replicas gauge
netfleet_operator_fleet_desired_replicas{fleet="arena",namespace="games"} 3
# HELP netfleet_operator_fleetautoscaler_current_replicas A FleetAutoscaler's fleet's servers that have not ended, as the autoscaler last saw them (status.currentReplicas).
# TYPE netfleet_operator_fleetautoscaler_current_replicas gauge
netfleet_operator_fleetautoscaler_current_replicas{fleet="arena",fleetautoscaler="arena-buffer",namespace="games"} 3
# HELP netfleet_operator_fleetautoscaler_desired_replicas The replicas a FleetAutoscaler last decided for its fleet (status.desiredReplicas).
# TYPE netfleet_operator_fleetautoscaler_desired_replicas gauge
netfleet_operator_fleetautoscaler_desired_replicas{fleet="arena",fleetautoscaler="arena-buffer",namespace="games"} 4
# HELP netfleet_operator_gameserver_player_capacity Players the games of the GameServers that have not ended declared they take, by namespace and fleet (status.players.capacity).
# TYPE netfleet_operator_gameserver_player_capacity gauge
netfleet_operator_gameserver_player_capacity{fleet="",namespace="games"} 0
netfleet_operator_gameserver_player_capacity{fleet="arena",namespace="games"} 16
# HELP netfleet_operator_gameserver_players Players connected to the GameServers that have not ended, by namespace and fleet (status.players.connected).
# TYPE netfleet_operator_gameserver_players gauge
netfleet_operator_gameserver_players{fleet="",namespace="games"} 0
netfleet_operator_gameserver_players{fleet="arena",namespace="games"} 5
# HELP netfleet_operator_gameservers GameServers by namespace, fleet (empty for a GameServer outside a Fleet) and state.
# TYPE netfleet_operator_gameservers gauge
netfleet_operator_gameservers{fleet="",namespace="games",state="Allocated"} 0
netfleet_operator_gameservers{fleet="",namespace="games",state="Creating"} 0
netfleet_operator_gameservers{fleet="",namespace="games",state="Error"} 1
netfleet_operator_gameservers{fleet="",namespace="games",state="Ready"} 0
netfleet_operator_gameservers{fleet="",namespace="games",state="Reserved"} 0
netfleet_operator_gameservers{fleet="",namespace="games",state="Shutdown"} 0
netfleet_operator_gameservers{fleet="",namespace="games",state="Starting"} 0
netfleet_operator_gameservers{fleet="",namespace="games",state="Unhealthy"} 0
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Allocated"} 1
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Creating"} 1
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Error"} 0
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Ready"} 1
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Reserved"} 0
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Shutdown"} 1
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Starting"} 0
netfleet_operator_gameservers{fleet="arena",namespace="games",state="Unhealthy"} 0
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(tt.objects...).Build()
			col := NewStateCollector(c)
			if err := testutil.CollectAndCompare(col, strings.NewReader(tt.want)); err != nil {
				t.Error(err)
			}
			problems, err := testutil.CollectAndLint(col)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}

// TestBuildPodFleetLabel: a fleet's server's Pod carries the fleet label, which a scrape config
// maps to the fleet label of the server's metrics; a standalone server's Pod has none.
func TestBuildPodFleetLabel(t *testing.T) {
	tests := []struct {
		name, fleet string
	}{
		{name: "in a fleet", fleet: "arena"},
		{name: "standalone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs := newGameServer("ns", "arena-1", v1alpha1.PortPolicyNone, 0)
			if tt.fleet != "" {
				gs.Labels = map[string]string{v1alpha1.LabelFleet: tt.fleet}
			}
			pod, err := buildPod(gs, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := pod.Labels[v1alpha1.LabelFleet]
			if got != tt.fleet || ok != (tt.fleet != "") || pod.Labels[v1alpha1.LabelGameServer] != "arena-1" {
				t.Errorf("pod labels %v", pod.Labels)
			}
		})
	}
}
