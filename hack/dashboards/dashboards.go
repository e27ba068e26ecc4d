package main

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The dashboards use Grafana's classic dashboard model (JSON schema v1), which the SDK retires
// in favor of the v2 model: the classic model is what file provisioning and the chart's dashboard
// ConfigMaps load on every Grafana version, while v2 needs Grafana 12's v2 API.
type (
	board        = dashboard.Dashboard        //nolint:staticcheck // classic model, see above
	boardBuilder = dashboard.DashboardBuilder //nolint:staticcheck // classic model, see above
)

// generated is one dashboard and the file it is written to.
type generated struct {
	file  string
	board board
}

// build builds every dashboard.
func build() ([]generated, error) {
	defs := []struct {
		file string
		b    *boardBuilder
	}{
		{"netfleet-fleet-overview.json", fleetOverview()},
		{"netfleet-gameserver.json", gameServerDrillDown()},
		{"netfleet-operator.json", operatorBoard()},
	}
	out := make([]generated, 0, len(defs))
	for _, d := range defs {
		board, err := d.b.Build()
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", d.file, err)
		}
		// Panel ids are unique within a dashboard and stable across generations, so links to a
		// panel (viewPanel=<id>) keep working.
		for i, p := range board.Panels {
			id := uint32(i + 1)
			switch {
			case p.Panel != nil:
				p.Panel.Id = &id
			case p.RowPanel != nil:
				p.RowPanel.Id = id
			}
		}
		out = append(out, generated{file: d.file, board: board})
	}
	return out, nil
}

// datasource is the Prometheus the panels query: the dashboard's datasource variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// Label selectors. Game-server series carry the namespace, pod, gameserver and fleet target
// labels (docs/observability.md); operator series carry the namespace and fleet of the objects
// they count.
const (
	selFleet  = `namespace=~"$namespace", fleet=~"$fleet"`
	selServer = `namespace=~"$namespace", fleet=~"$fleet", gameserver=~"$gameserver"`
	selOne    = `namespace=~"$namespace", gameserver="$gameserver"`
	// selControllers keeps controller-runtime's series to netfleet's controllers.
	selControllers = `controller=~"gameserver|fleet|gameserverallocation|fleetautoscaler"`
)

// newBoard is a dashboard with netfleet's common settings and the datasource variable.
func newBoard(uid, title, description string) *boardBuilder {
	//nolint:staticcheck // classic model, see board
	b := dashboard.NewDashboardBuilder(title)
	return b.Uid(uid).
		Description(description).
		Tags([]string{"netfleet"}).
		Editable().
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus"))
}

// queryVar is a variable listing a label's values; a multi variable offers All, which matches
// every value including the empty one (a GameServer outside a Fleet has fleet="").
func queryVar(name, label, query string, multi bool) *dashboard.QueryVariableBuilder {
	v := dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).
		Definition(query).
		Datasource(datasource).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
	if multi {
		v = v.Multi(true).IncludeAll(true).AllValue(".*")
	}
	return v
}

func namespaceVar() *dashboard.QueryVariableBuilder {
	return queryVar("namespace", "Namespace", `label_values(netfleet_operator_gameservers, namespace)`, true)
}

func fleetVar() *dashboard.QueryVariableBuilder {
	return queryVar("fleet", "Fleet", `label_values(netfleet_operator_gameservers{namespace=~"$namespace"}, fleet)`, true)
}

func gameServerVar(multi bool) *dashboard.QueryVariableBuilder {
	return queryVar("gameserver", "Game server",
		`label_values(netfleet_gameserver_connected_peers{namespace=~"$namespace", fleet=~"$fleet"}, gameserver)`, multi)
}

// query is one PromQL target of a panel.
type query struct{ expr, legend string }

func q(expr, legend string) query { return query{expr: expr, legend: legend} }

// panel is a time series panel of the given unit, width (of 24) and queries.
func panel(title, description, unit string, width uint32, queries ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Height(8).
		Span(width).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true))
	for i, qq := range queries {
		p = p.WithTarget(prometheus.NewDataqueryBuilder().
			RefId(string(rune('A' + i))).
			Expr(qq.expr).
			LegendFormat(qq.legend))
	}
	return p
}

// stacked is panel with its series stacked.
func stacked(title, description, unit string, width uint32, queries ...query) *timeseries.PanelBuilder {
	return panel(title, description, unit, width, queries...).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		FillOpacity(30)
}

// quantile is the q-quantile of a histogram summed over the selected series.
func quantile(q float64, metric, sel string) string {
	return fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(%s_bucket{%s}[$__rate_interval])))`, q, metric, sel)
}

func fleetOverview() *boardBuilder {
	return newBoard("netfleet-fleet-overview", "netfleet / Fleet overview",
		"Game servers by state, config rollout, players and capacity, autoscaling, connected peers and the fleet-wide distribution of each peer's send rate, loss and RTT.").
		WithVariable(namespaceVar()).
		WithVariable(fleetVar()).
		WithVariable(gameServerVar(true)).
		WithRow(dashboard.NewRowBuilder("Fleet")).
		WithPanel(stacked("Game servers by state", "GameServers by status.state, from the operator.", "short", 8,
			q(`sum by (state) (netfleet_operator_gameservers{`+selFleet+`})`, "{{state}}"))).
		WithPanel(panel("Config applied vs desired",
			"Per Fleet: desired replicas next to the GameServers whose process runs the Fleet's desired netcode config.", "short", 8,
			q(`sum by (namespace, fleet) (netfleet_operator_fleet_desired_replicas{`+selFleet+`})`, "{{fleet}} desired"),
			q(`sum by (namespace, fleet) (netfleet_operator_fleet_config_applied_replicas{`+selFleet+`})`, "{{fleet}} applied"))).
		WithPanel(stacked("Connected peers", "Peers connected to each game server.", "short", 8,
			q(`sum by (gameserver) (netfleet_gameserver_connected_peers{`+selServer+`})`, "{{gameserver}}"))).
		WithPanel(panel("Players and capacity",
			"Per Fleet: the players connected to its servers next to the capacity their games declared (status.players), from the operator.", "short", 24,
			q(`sum by (namespace, fleet) (netfleet_operator_gameserver_players{`+selFleet+`})`, "{{fleet}} players"),
			q(`sum by (namespace, fleet) (netfleet_operator_gameserver_player_capacity{`+selFleet+`})`, "{{fleet}} capacity"))).
		WithRow(dashboard.NewRowBuilder("Autoscaling")).
		WithPanel(autoscaledReplicas(24)).
		WithRow(dashboard.NewRowBuilder("Peers, fleet-wide (distribution over peer-seconds)")).
		WithPanel(panel("Peer send rate",
			"Every connected peer's snapshot send rate, observed once per second: the share of peer-seconds at or below each line. Low is bad.", "hertz", 8,
			q(quantile(0.1, "netfleet_gameserver_peers_send_rate_hertz", selServer), "p10"),
			q(quantile(0.5, "netfleet_gameserver_peers_send_rate_hertz", selServer), "p50"))).
		WithPanel(panel("Peer snapshot loss",
			"Every connected peer's application-level snapshot loss, observed once per second.", "percentunit", 8,
			q(quantile(0.5, "netfleet_gameserver_peers_loss_ratio", selServer), "p50"),
			q(quantile(0.9, "netfleet_gameserver_peers_loss_ratio", selServer), "p90"),
			q(quantile(0.99, "netfleet_gameserver_peers_loss_ratio", selServer), "p99"))).
		WithPanel(panel("Peer RTT",
			"Every connected peer's ENet round-trip time, observed once per second.", "s", 8,
			q(quantile(0.5, "netfleet_gameserver_peers_rtt_seconds", selServer), "p50"),
			q(quantile(0.9, "netfleet_gameserver_peers_rtt_seconds", selServer), "p90"),
			q(quantile(0.99, "netfleet_gameserver_peers_rtt_seconds", selServer), "p99"))).
		WithRow(dashboard.NewRowBuilder("Sessions")).
		WithPanel(stacked("Sessions closed by code",
			"Sessions the servers closed, per second, by close code: 1001 going away, 1008 abuse, 1013 stalled, 4001 no ping.", "ops", 8,
			q(`sum by (code) (rate(netfleet_gameserver_session_closes_total{`+selServer+`}[$__rate_interval]))`, "{{code}}"),
			q(`sum (rate(netfleet_gameserver_peer_disconnects_total{`+selServer+`}[$__rate_interval]))`, "by the peer"))).
		WithPanel(stacked("Sessions by rate class", "Sessions served every tick (1), every 2nd or every 4th.", "short", 8,
			q(`sum by (rate_class) (netfleet_gameserver_sessions{`+selServer+`})`, "class {{rate_class}}"))).
		WithPanel(stacked("Skips by reason", "Due ticks a session could not be served on, per second.", "ops", 8,
			q(`sum by (reason) (rate(netfleet_gameserver_session_skips_total{`+selServer+`}[$__rate_interval]))`, "{{reason}}")))
}

func gameServerDrillDown() *boardBuilder {
	perPeer := func(title, description, unit, metric string) *timeseries.PanelBuilder {
		return panel(title, description, unit, 12, q(metric+`{`+selOne+`}`, "peer {{peer}}"))
	}
	return newBoard("netfleet-gameserver", "netfleet / Game server",
		"One game server: every peer's send rate, loss, RTT and throttle (when observability.perPeerMetrics is on), tick time, skips, closes, pools and transport.").
		WithVariable(namespaceVar()).
		WithVariable(fleetVar()).
		WithVariable(gameServerVar(false)).
		WithRow(dashboard.NewRowBuilder("Peers (observability.perPeerMetrics)")).
		WithPanel(perPeer("Send rate per peer", "Snapshots sent per second over the last second.", "hertz", "netfleet_gameserver_peer_send_rate_hertz")).
		WithPanel(panel("Loss per peer", "Application-level snapshot loss (from the client's ACKs) and ENet's reliable-packet loss.", "percentunit", 12,
			q(`netfleet_gameserver_peer_loss_ratio{`+selOne+`}`, "peer {{peer}}"),
			q(`netfleet_gameserver_peer_enet_loss_ratio{`+selOne+`}`, "peer {{peer}} ENet"))).
		WithPanel(perPeer("RTT per peer", "ENet's smoothed round-trip time.", "s", "netfleet_gameserver_peer_rtt_seconds")).
		WithPanel(perPeer("Throttle per peer", "The congestion throttle, in [minSendHz / tickRateHz, 1].", "percentunit", "netfleet_gameserver_peer_throttle_ratio")).
		WithPanel(panel("Bytes sent per peer", "Snapshot and RESET payload bytes handed to ENet, per second.", "Bps", 12,
			q(`rate(netfleet_gameserver_peer_sent_bytes_total{`+selOne+`}[$__rate_interval])`, "peer {{peer}}"))).
		WithPanel(perPeer("Frame budget per peer", "The byte budget of the peer's last frame.", "bytes", "netfleet_gameserver_peer_frame_budget_bytes")).
		WithPanel(perPeer("Bottleneck ceiling per peer",
			"The byte rate the congestion controller holds the peer under: about what its path delivered when a queue built on it. 0 when the path has shown none.",
			"Bps", "netfleet_gameserver_peer_rate_ceiling_bytes_per_second")).
		WithRow(dashboard.NewRowBuilder("Peers, distribution (always on)")).
		WithPanel(panel("Peer send rate", "This server's peers, observed once per second.", "hertz", 8,
			q(quantile(0.1, "netfleet_gameserver_peers_send_rate_hertz", selOne), "p10"),
			q(quantile(0.5, "netfleet_gameserver_peers_send_rate_hertz", selOne), "p50"))).
		WithPanel(panel("Peer snapshot loss", "This server's peers, observed once per second.", "percentunit", 8,
			q(quantile(0.5, "netfleet_gameserver_peers_loss_ratio", selOne), "p50"),
			q(quantile(0.99, "netfleet_gameserver_peers_loss_ratio", selOne), "p99"))).
		WithPanel(panel("Peer RTT", "This server's peers, observed once per second.", "s", 8,
			q(quantile(0.5, "netfleet_gameserver_peers_rtt_seconds", selOne), "p50"),
			q(quantile(0.99, "netfleet_gameserver_peers_rtt_seconds", selOne), "p99"))).
		WithRow(dashboard.NewRowBuilder("Tick loop and sessions")).
		WithPanel(panel("Tick duration", "Time one tick takes, from its start to its flush.", "s", 8,
			q(quantile(0.5, "netfleet_gameserver_tick_duration_seconds", selOne), "p50"),
			q(quantile(0.99, "netfleet_gameserver_tick_duration_seconds", selOne), "p99"))).
		WithPanel(stacked("Skips by reason", "Due ticks a session could not be served on, per second: busy (both frame slots taken), pool (frame pool exhausted), lag (client behind).", "ops", 8,
			q(`sum by (reason) (rate(netfleet_gameserver_session_skips_total{`+selOne+`}[$__rate_interval]))`, "{{reason}}"))).
		WithPanel(stacked("Sessions by rate class", "Sessions served every tick (1), every 2nd or every 4th.", "short", 8,
			q(`sum by (rate_class) (netfleet_gameserver_sessions{`+selOne+`})`, "class {{rate_class}}"))).
		WithPanel(stacked("Sessions closed", "Sessions closed per second: by the server with its close code, or by the peer.", "ops", 8,
			q(`sum by (code) (rate(netfleet_gameserver_session_closes_total{`+selOne+`}[$__rate_interval]))`, "{{code}}"),
			q(`sum (rate(netfleet_gameserver_peer_disconnects_total{`+selOne+`}[$__rate_interval]))`, "by the peer"))).
		WithPanel(stacked("Inbound messages refused", "Client messages refused per second, by reason.", "ops", 8,
			q(`sum by (reason) (rate(netfleet_gameserver_ingress_refused_messages_total{`+selOne+`}[$__rate_interval]))`, "{{reason}}"))).
		WithPanel(panel("Pool usage", "Bytes held by each pool as a share of its budget (memory.*PoolBudgetBytes).", "percentunit", 8,
			q(`sum by (pool) (netfleet_gameserver_pool_bytes{`+selOne+`}) / sum by (pool) (netfleet_gameserver_pool_budget_bytes{`+selOne+`})`, "{{pool}}"))).
		WithRow(dashboard.NewRowBuilder("Transport and config")).
		WithPanel(panel("Transport bytes", "ENet traffic of the host, protocol headers included, per second.", "Bps", 8,
			q(`sum (rate(netfleet_gameserver_transport_sent_bytes_total{`+selOne+`}[$__rate_interval]))`, "sent"),
			q(`sum (rate(netfleet_gameserver_transport_received_bytes_total{`+selOne+`}[$__rate_interval]))`, "received"))).
		WithPanel(panel("Refused connects and malformed datagrams", "CONNECTs over the per-source rate and datagrams dropped before ENet parsed them, per second.", "ops", 8,
			q(`sum (rate(netfleet_gameserver_connect_refusals_total{`+selOne+`}[$__rate_interval]))`, "connects refused"),
			q(`sum (rate(netfleet_gameserver_malformed_datagrams_total{`+selOne+`}[$__rate_interval]))`, "malformed datagrams"))).
		WithPanel(panel("Running config generation", "The GameServer generation whose netcode the process runs, with its config hash.", "short", 8,
			q(`max by (hash) (netfleet_gameserver_config_generation{`+selOne+`} * on (namespace, pod) group_left (hash) netfleet_gameserver_config_info{`+selOne+`})`, "generation (hash {{hash}})")))
}

func operatorBoard() *boardBuilder {
	return newBoard("netfleet-operator", "netfleet / Operator",
		"The operator's config pushes (latency, errors, propagation), its reconcilers, the fleets it keeps and their autoscaling.").
		WithVariable(namespaceVar()).
		WithVariable(fleetVar()).
		WithRow(dashboard.NewRowBuilder("Live config")).
		WithPanel(panel("Config push latency", "Duration of one PUT /v1/netcode to a game server, successful or not.", "s", 8,
			q(quantile(0.5, "netfleet_operator_config_push_duration_seconds", ""), "p50"),
			q(quantile(0.99, "netfleet_operator_config_push_duration_seconds", ""), "p99"))).
		WithPanel(stacked("Config push errors", "Failed pushes per second by reason.", "ops", 8,
			q(`sum by (reason) (rate(netfleet_operator_config_push_errors_total[$__rate_interval]))`, "{{reason}}"))).
		WithPanel(panel("Config propagation", "From the operator seeing a new GameServer generation to the game server running it.", "s", 8,
			q(quantile(0.5, "netfleet_operator_config_propagation_seconds", ""), "p50"),
			q(quantile(0.99, "netfleet_operator_config_propagation_seconds", ""), "p99"))).
		WithRow(dashboard.NewRowBuilder("Reconcilers")).
		WithPanel(stacked("Reconcile errors", "Reconciles that returned an error, per second, by controller.", "ops", 8,
			q(`sum by (controller) (rate(controller_runtime_reconcile_errors_total{`+selControllers+`}[$__rate_interval]))`, "{{controller}}"))).
		WithPanel(stacked("Reconciles by result", "Reconciles per second by controller and result.", "ops", 8,
			q(`sum by (controller, result) (rate(controller_runtime_reconcile_total{`+selControllers+`}[$__rate_interval]))`, "{{controller}} {{result}}"))).
		WithPanel(panel("Work queue depth", "Objects waiting to be reconciled.", "short", 8,
			q(`sum by (name) (workqueue_depth{name=~"gameserver|fleet|gameserverallocation|fleetautoscaler"})`, "{{name}}"))).
		WithRow(dashboard.NewRowBuilder("Fleets")).
		WithPanel(stacked("Game servers by state", "GameServers by status.state.", "short", 12,
			q(`sum by (state) (netfleet_operator_gameservers{`+selFleet+`})`, "{{state}}"))).
		WithPanel(panel("Config applied vs desired", "Per Fleet: desired replicas and the GameServers that run the desired config.", "short", 12,
			q(`sum by (namespace, fleet) (netfleet_operator_fleet_desired_replicas{`+selFleet+`})`, "{{fleet}} desired"),
			q(`sum by (namespace, fleet) (netfleet_operator_fleet_config_applied_replicas{`+selFleet+`})`, "{{fleet}} applied"))).
		WithRow(dashboard.NewRowBuilder("Autoscaling")).
		WithPanel(autoscaledReplicas(12)).
		WithPanel(stacked("Autoscaler webhook calls", "Calls of FleetAutoscaler webhooks per second, by result: ok, or why the fleet was left alone.", "ops", 12,
			q(`sum by (result) (rate(netfleet_operator_fleetautoscaler_webhook_duration_seconds_count[$__rate_interval]))`, "{{result}}")))
}

// autoscaledReplicas is the panel of autoscaled fleets: the replicas their autoscalers decided,
// the servers they have, and the Allocated ones among them (the buffer is the gap between the
// last two).
func autoscaledReplicas(width uint32) *timeseries.PanelBuilder {
	return panel("Autoscaled replicas: desired, current, allocated",
		"Per autoscaled Fleet: the replicas its FleetAutoscaler decided, the servers it has that have not ended, and the Allocated ones; the free servers are current minus allocated.",
		"short", width,
		q(`sum by (namespace, fleet) (netfleet_operator_fleetautoscaler_desired_replicas{`+selFleet+`})`, "{{fleet}} desired"),
		q(`sum by (namespace, fleet) (netfleet_operator_fleetautoscaler_current_replicas{`+selFleet+`})`, "{{fleet}} current"),
		q(`sum by (namespace, fleet) (netfleet_operator_gameservers{`+selFleet+`, state="Allocated"}) and on (namespace, fleet) netfleet_operator_fleetautoscaler_desired_replicas`, "{{fleet}} allocated"))
}
