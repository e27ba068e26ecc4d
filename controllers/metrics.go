package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reasons a config push fails, the values of the reason label. The set is closed so the series
// stay bounded.
const (
	pushErrUnreachable  = "unreachable"
	pushErrRefused      = "refused"
	pushErrConflict     = "conflict"
	pushErrUnauthorized = "unauthorized"
	pushErrOther        = "other"
)

var (
	configPushDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "netfleet_operator_config_push_duration_seconds",
		Help:    "Duration of one config push (PUT /v1/netcode to a game server), successful or not.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	})
	configPushErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "netfleet_operator_config_push_errors_total",
		Help: "Failed config pushes by reason: unreachable, refused, conflict, unauthorized, other.",
	}, []string{"reason"})
	configPropagation = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "netfleet_operator_config_propagation_seconds",
		Help: "Time from the operator first observing a new GameServer generation to the game " +
			"server running it.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	})
)

func init() {
	metrics.Registry.MustRegister(configPushDuration, configPushErrors, configPropagation)
	// Every reason starts at zero, so a rate() over it is defined before the first failure.
	for _, r := range []string{pushErrUnreachable, pushErrRefused, pushErrConflict, pushErrUnauthorized, pushErrOther} {
		configPushErrors.WithLabelValues(r)
	}
}
