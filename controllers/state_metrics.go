package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// stateListTimeout bounds the cache reads of one scrape.
const stateListTimeout = 5 * time.Second

// gameServerStates are the values of the state label, each exported for every fleet (zero
// included), so a panel's series do not appear and vanish as servers move between states.
var gameServerStates = []v1alpha1.GameServerState{
	v1alpha1.GameServerStateCreating, v1alpha1.GameServerStateStarting, v1alpha1.GameServerStateReady,
	v1alpha1.GameServerStateReserved, v1alpha1.GameServerStateAllocated, v1alpha1.GameServerStateShutdown,
	v1alpha1.GameServerStateError, v1alpha1.GameServerStateUnhealthy,
}

// StateCollector exports what the fleet looks like now, read from the manager's cache at scrape
// time: GameServers by namespace, fleet and state, the players connected to them and the capacity
// their games declared, each Fleet's desired replicas next to the
// replicas that run its desired config, and each FleetAutoscaler's current and desired replicas. Reading at scrape time keeps the reconcilers free of
// metric bookkeeping, and a deleted Fleet's series go with it.
type StateCollector struct {
	reader      client.Reader
	gameServers *prometheus.Desc
	players     *prometheus.Desc
	capacity    *prometheus.Desc
	desired     *prometheus.Desc
	applied     *prometheus.Desc
	fasCurrent  *prometheus.Desc
	fasDesired  *prometheus.Desc
}

// NewStateCollector returns a collector that lists GameServers and Fleets from reader, normally
// the manager's cached client. Register it with the operator's registry (metrics.Registry).
func NewStateCollector(reader client.Reader) *StateCollector {
	return &StateCollector{
		reader: reader,
		gameServers: prometheus.NewDesc("netfleet_operator_gameservers",
			"GameServers by namespace, fleet (empty for a GameServer outside a Fleet) and state.",
			[]string{"namespace", "fleet", "state"}, nil),
		players: prometheus.NewDesc("netfleet_operator_gameserver_players",
			"Players connected to the GameServers that have not ended, by namespace and fleet (status.players.connected).",
			[]string{"namespace", "fleet"}, nil),
		capacity: prometheus.NewDesc("netfleet_operator_gameserver_player_capacity",
			"Players the games of the GameServers that have not ended declared they take, by namespace and fleet (status.players.capacity).",
			[]string{"namespace", "fleet"}, nil),
		desired: prometheus.NewDesc("netfleet_operator_fleet_desired_replicas",
			"A Fleet's desired replicas (spec.replicas).",
			[]string{"namespace", "fleet"}, nil),
		applied: prometheus.NewDesc("netfleet_operator_fleet_config_applied_replicas",
			"A Fleet's GameServers that run the Fleet's desired netcode config (status.configAppliedReplicas).",
			[]string{"namespace", "fleet"}, nil),
		fasCurrent: prometheus.NewDesc("netfleet_operator_fleetautoscaler_current_replicas",
			"A FleetAutoscaler's fleet's servers that have not ended, as the autoscaler last saw them (status.currentReplicas).",
			[]string{"namespace", "fleet", "fleetautoscaler"}, nil),
		fasDesired: prometheus.NewDesc("netfleet_operator_fleetautoscaler_desired_replicas",
			"The replicas a FleetAutoscaler last decided for its fleet (status.desiredReplicas).",
			[]string{"namespace", "fleet", "fleetautoscaler"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.gameServers
	ch <- c.players
	ch <- c.capacity
	ch <- c.desired
	ch <- c.applied
	ch <- c.fasCurrent
	ch <- c.fasDesired
}

// Collect implements prometheus.Collector. A failed cache read (e.g. before the cache has synced)
// leaves that part out of the scrape rather than failing the whole scrape.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateListTimeout)
	defer cancel()
	log := ctrllog.Log.WithName("state-metrics")

	var servers v1alpha1.GameServerList
	if err := c.reader.List(ctx, &servers, client.UnsafeDisableDeepCopy); err != nil {
		log.V(1).Info("GameServers not exported", "error", err.Error())
	} else {
		type key struct{ namespace, fleet string }
		counts := map[key]map[v1alpha1.GameServerState]int{}
		players, capacity := map[key]int32{}, map[key]int32{}
		for i := range servers.Items {
			gs := &servers.Items[i]
			k := key{gs.Namespace, gs.Labels[v1alpha1.LabelFleet]}
			if counts[k] == nil {
				counts[k] = map[v1alpha1.GameServerState]int{}
			}
			if p := gs.Status.Players; p != nil && !gs.Status.State.IsFinal() {
				players[k] += p.Connected
				capacity[k] += p.Capacity
			}
			state := gs.Status.State
			if state == "" {
				// Not reconciled yet: the state machine's first state.
				state = v1alpha1.GameServerStateCreating
			}
			counts[k][state]++
		}
		for k, byState := range counts {
			for _, st := range gameServerStates {
				ch <- prometheus.MustNewConstMetric(c.gameServers, prometheus.GaugeValue, float64(byState[st]), k.namespace, k.fleet, string(st))
			}
			ch <- prometheus.MustNewConstMetric(c.players, prometheus.GaugeValue, float64(players[k]), k.namespace, k.fleet)
			ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(capacity[k]), k.namespace, k.fleet)
		}
	}

	var fleets v1alpha1.FleetList
	if err := c.reader.List(ctx, &fleets, client.UnsafeDisableDeepCopy); err != nil {
		log.V(1).Info("Fleets not exported", "error", err.Error())
	} else {
		for i := range fleets.Items {
			f := &fleets.Items[i]
			ch <- prometheus.MustNewConstMetric(c.desired, prometheus.GaugeValue, float64(f.Spec.Replicas), f.Namespace, f.Name)
			ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(f.Status.ConfigAppliedReplicas), f.Namespace, f.Name)
		}
	}

	var autoscalers v1alpha1.FleetAutoscalerList
	if err := c.reader.List(ctx, &autoscalers, client.UnsafeDisableDeepCopy); err != nil {
		log.V(1).Info("FleetAutoscalers not exported", "error", err.Error())
		return
	}
	for i := range autoscalers.Items {
		a := &autoscalers.Items[i]
		ch <- prometheus.MustNewConstMetric(c.fasCurrent, prometheus.GaugeValue, float64(a.Status.CurrentReplicas), a.Namespace, a.Spec.FleetName, a.Name)
		ch <- prometheus.MustNewConstMetric(c.fasDesired, prometheus.GaugeValue, float64(a.Status.DesiredReplicas), a.Namespace, a.Spec.FleetName, a.Name)
	}
}
