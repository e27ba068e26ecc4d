package metrics

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/session"
)

// stat is one peer's figures as the tick loop publishes them.
func stat(slot, class int, hz, loss float64, rttMs uint32, bytes, skipsLag, refused uint64) broadcast.PeerStat {
	return broadcast.PeerStat{
		Stats: session.Stats{
			Slot: slot, RateClass: class, SendRateHz: hz, LossRatio: loss, EnetLossRatio: loss / 2,
			RTTMs: rttMs, Throttle: 0.5, FrameBudgetBytes: 1200, CeilingBytesPerSec: float64(10 * bytes),
		},
		Counters: session.Counters{BytesSent: bytes, SkipsLag: skipsLag, SkipsBusy: 1, IngressRefused: refused},
	}
}

func second(peers ...broadcast.PeerStat) broadcast.Second {
	return broadcast.Second{
		Peers:              peers,
		Frames:             session.FramePoolStats{BudgetBytes: 1 << 20, HeldBytes: 4096},
		States:             session.StatePoolStats{BudgetBytes: 2 << 20, SpareBytes: 100},
		StateInUse:         900,
		InboxBytes:         2048,
		ConnectRefusals:    3,
		MalformedDatagrams: 4,
		PeersRefused:       5,
		GameRefused:        6,
		GameErrors:         7,
		OverloadSpans:      1,
	}
}

// series gathers c and flattens every sample to "name{label="value",...}" -> value; a
// histogram contributes its _count.
func series(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[key(mf.GetName(), m)] = value(mf.GetType(), m)
		}
	}
	return out
}

func key(name string, m *dto.Metric) string {
	var labels []string
	for _, l := range m.GetLabel() {
		labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(labels)
	if len(labels) == 0 {
		return name
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// TestCollector drives a Collector through publications, session ends and a live switch of
// observability.perPeerMetrics, checking the series after each step.
func TestCollector(t *testing.T) {
	status := netcode.ConfigStatus{Generation: 7, Hash: "abc123", Config: netcode.NetcodeConfig{}.Default()}
	c := New(Options{Slots: 4, Status: func() netcode.ConfigStatus { return status }})
	off := false

	steps := []struct {
		name   string
		do     func()
		want   map[string]float64
		absent []string
	}{
		{
			name: "before the first second",
			do:   func() {},
			want: map[string]float64{
				"netfleet_gameserver_config_generation":                               7,
				`netfleet_gameserver_config_info{hash="abc123"}`:                      1,
				`netfleet_gameserver_session_closes_total{code="1013"}`:               0,
				`netfleet_gameserver_session_skips_total{reason="lag"}`:               0,
				`netfleet_gameserver_sessions{rate_class="1"}`:                        0,
				"netfleet_gameserver_peers_send_rate_hertz":                           0,
				`netfleet_gameserver_pool_budget_bytes{pool="ingress"}`:               netcode.DefaultMemoryIngressPoolBudgetBytes,
				`netfleet_gameserver_ingress_refused_messages_total{reason="budget"}`: 0,
			},
			absent: []string{`netfleet_gameserver_peer_send_rate_hertz{peer="0"}`},
		},
		{
			name: "two peers",
			do: func() {
				c.ObserveTick(broadcast.TickStats{Work: time.Millisecond, Peers: 2})
				c.ObserveSecond(second(stat(0, 1, 60, 0.01, 40, 1000, 2, 1), stat(3, 4, 15, 0.2, 0, 500, 0, 0)))
			},
			want: map[string]float64{
				"netfleet_gameserver_connected_peers":                                 2,
				`netfleet_gameserver_peer_send_rate_hertz{peer="0"}`:                  60,
				`netfleet_gameserver_peer_loss_ratio{peer="3"}`:                       0.2,
				`netfleet_gameserver_peer_enet_loss_ratio{peer="3"}`:                  0.1,
				`netfleet_gameserver_peer_rtt_seconds{peer="0"}`:                      0.04,
				`netfleet_gameserver_peer_throttle_ratio{peer="0"}`:                   0.5,
				`netfleet_gameserver_peer_sent_bytes_total{peer="3"}`:                 500,
				`netfleet_gameserver_peer_frame_budget_bytes{peer="0"}`:               1200,
				`netfleet_gameserver_peer_rate_ceiling_bytes_per_second{peer="0"}`:    10000,
				`netfleet_gameserver_peer_rate_ceiling_bytes_per_second{peer="3"}`:    5000,
				`netfleet_gameserver_sessions{rate_class="1"}`:                        1,
				`netfleet_gameserver_sessions{rate_class="4"}`:                        1,
				`netfleet_gameserver_session_skips_total{reason="lag"}`:               2,
				`netfleet_gameserver_session_skips_total{reason="busy"}`:              2,
				`netfleet_gameserver_ingress_refused_messages_total{reason="budget"}`: 1,
				"netfleet_gameserver_tick_duration_seconds":                           1,
				"netfleet_gameserver_peers_send_rate_hertz":                           2,
				"netfleet_gameserver_peers_loss_ratio":                                2,
				"netfleet_gameserver_peers_rtt_seconds":                               2,
				`netfleet_gameserver_pool_bytes{pool="frame"}`:                        4096,
				`netfleet_gameserver_pool_bytes{pool="state"}`:                        1000,
				`netfleet_gameserver_pool_bytes{pool="ingress"}`:                      2048,
				`netfleet_gameserver_pool_budget_bytes{pool="state"}`:                 2 << 20,
				"netfleet_gameserver_connect_refusals_total":                          3,
				"netfleet_gameserver_malformed_datagrams_total":                       4,
				"netfleet_gameserver_peer_refusals_total":                             5,
				"netfleet_gameserver_game_join_refusals_total":                        6,
				"netfleet_gameserver_game_join_errors_total":                          7,
				"netfleet_gameserver_overload_spans_total":                            1,
			},
		},
		{
			name: "a second later, counters folded once",
			do: func() {
				c.ObserveSecond(second(stat(0, 1, 60, 0.01, 40, 3000, 5, 1), stat(3, 4, 15, 0.2, 80, 700, 0, 0)))
			},
			want: map[string]float64{
				`netfleet_gameserver_peer_sent_bytes_total{peer="0"}`:    3000,
				`netfleet_gameserver_session_skips_total{reason="lag"}`:  5,
				`netfleet_gameserver_session_skips_total{reason="busy"}`: 2,
				"netfleet_gameserver_peers_rtt_seconds":                  4,
			},
		},
		{
			name: "peer 0 closed for stalling: its series go, its last counts stay in the totals",
			do: func() {
				end := stat(0, 1, 60, 0.01, 40, 3500, 9, 1)
				c.ObservePeerEnd(broadcast.PeerEnd{PeerStat: end, Code: protocol.CloseStalled})
			},
			want: map[string]float64{
				`netfleet_gameserver_session_closes_total{code="1013"}`: 1,
				`netfleet_gameserver_session_skips_total{reason="lag"}`: 9,
				`netfleet_gameserver_sessions{rate_class="1"}`:          0,
				`netfleet_gameserver_peer_send_rate_hertz{peer="3"}`:    15,
			},
			absent: []string{`netfleet_gameserver_peer_send_rate_hertz{peer="0"}`, `netfleet_gameserver_peer_sent_bytes_total{peer="0"}`},
		},
		{
			name: "peer 3 leaves, a game's code, an unknown code and a new peer in slot 0 that starts afresh",
			do: func() {
				c.ObservePeerEnd(broadcast.PeerEnd{PeerStat: stat(3, 4, 15, 0.2, 80, 800, 0, 0)})
				c.ObservePeerEnd(broadcast.PeerEnd{PeerStat: stat(2, 1, 0, 0, 0, 0, 0, 0), Code: 4999})
				c.ObservePeerEnd(broadcast.PeerEnd{PeerStat: stat(4, 1, 0, 0, 0, 0, 0, 0), Code: 4100})
				c.ObservePeerEnd(broadcast.PeerEnd{PeerStat: stat(5, 1, 0, 0, 0, 0, 0, 0), Code: 3999})
				c.ObserveSecond(second(stat(0, 2, 30, 0, 20, 100, 1, 0)))
			},
			want: map[string]float64{
				"netfleet_gameserver_peer_disconnects_total":             1,
				`netfleet_gameserver_session_closes_total{code="other"}`: 1,
				`netfleet_gameserver_session_closes_total{code="game"}`:  2,
				`netfleet_gameserver_peer_sent_bytes_total{peer="0"}`:    100,
				`netfleet_gameserver_sessions{rate_class="2"}`:           1,
				`netfleet_gameserver_session_skips_total{reason="lag"}`:  10,
				`netfleet_gameserver_session_skips_total{reason="busy"}`: 6,
			},
			absent: []string{`netfleet_gameserver_peer_send_rate_hertz{peer="3"}`},
		},
		{
			name: "perPeerMetrics off: no per-peer series, the histograms stay",
			do: func() {
				status.Config.Observability.PerPeerMetrics = &off
				status.Generation = 8
				c.ObserveSecond(second(stat(0, 2, 30, 0, 20, 200, 1, 0)))
			},
			want: map[string]float64{
				"netfleet_gameserver_config_generation":     8,
				"netfleet_gameserver_peers_send_rate_hertz": 6,
			},
			absent: []string{`netfleet_gameserver_peer_send_rate_hertz{peer="0"}`, `netfleet_gameserver_peer_sent_bytes_total{peer="0"}`},
		},
	}
	for _, step := range steps {
		step.do()
		got := series(t, c)
		for k, want := range step.want {
			if v, ok := got[k]; !ok || v != want {
				t.Errorf("%s: %s = %v (present %v), want %v", step.name, k, v, ok, want)
			}
		}
		for _, k := range step.absent {
			if _, ok := got[k]; ok {
				t.Errorf("%s: %s is exported", step.name, k)
			}
		}
	}
}

// TestCollectorLint: every series passes Prometheus' own lint (the rules of promtool check
// metrics) with peers connected.
func TestCollectorLint(t *testing.T) {
	c := New(Options{Slots: 2, Status: func() netcode.ConfigStatus {
		return netcode.ConfigStatus{Hash: "h", Config: netcode.NetcodeConfig{}.Default()}
	}})
	c.ObserveSecond(second(stat(0, 1, 60, 0.01, 40, 1000, 2, 1), stat(1, 2, 30, 0, 30, 10, 0, 0)))
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestObserveAllocatesNothing: the three hooks run on the tick goroutine and allocate nothing
// once warm, peers connecting and leaving included.
func TestObserveAllocatesNothing(t *testing.T) {
	const slots = 64
	c := New(Options{Slots: slots})
	peers := make([]broadcast.PeerStat, slots)
	for i := range peers {
		peers[i] = stat(i, 1<<(i%3), 30, 0.01, 50, uint64(i), 1, 0)
	}
	sec := second(peers...)
	tests := []struct {
		name string
		fn   func()
	}{
		{"ObserveTick", func() { c.ObserveTick(broadcast.TickStats{Work: time.Millisecond, Peers: slots}) }},
		{"ObserveSecond", func() { c.ObserveSecond(sec) }},
		{"ObservePeerEnd", func() {
			c.ObservePeerEnd(broadcast.PeerEnd{PeerStat: peers[5], Code: protocol.CloseNoPing})
			c.ObserveSecond(sec)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn()
			if n := testing.AllocsPerRun(100, tt.fn); n != 0 {
				t.Errorf("%s allocates %v times per call", tt.name, n)
			}
		})
	}
}
