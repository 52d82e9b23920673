package runtimeagent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the agent's Prometheus metrics, in a registry of their own (served at /metrics).
type Metrics struct {
	Registry *prometheus.Registry

	state                  *prometheus.GaugeVec
	certNotAfter           prometheus.Gauge
	renewals               prometheus.Counter
	renewalFailures        prometheus.Counter
	expiringWithoutRenewal prometheus.Gauge
	tokenNeeded            prometheus.Gauge
	connectionAttempts     *prometheus.CounterVec
	syncDuration           prometheus.Histogram
	syncFailures           *prometheus.CounterVec
	appsApplied            prometheus.Gauge
	writes                 *prometheus.CounterVec
	conditionReports       *prometheus.CounterVec
}

// AllStates are the CompassConnection's states, each a series of the connection state metric.
var AllStates = []ConnectionState{Connected, ConnectionFailed, ConnectionMaintenanceFailed, SynchronizationFailed,
	ResourceApplicationFailed, MetadataUpdateFailed, Synchronized}

// NewMetrics registers the agent's metrics (and the Go and process collectors) in a new registry.
func NewMetrics() *Metrics {
	const ns = "compass_runtime_agent"
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "connection_state",
			Help: "1 for the CompassConnection's current connectionState, 0 for the others."}, []string{"state"}),
		certNotAfter: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "certificate_not_after_seconds",
			Help: "When the client certificate expires (Unix time)."}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "certificate_renewals_total",
			Help: "Client certificates renewed."}),
		renewalFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "certificate_maintenance_failures_total",
			Help: "Failed checks or renewals of the connection on the certificate-secured Connector."}),
		expiringWithoutRenewal: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "certificate_expiring_without_renewal",
			Help: "1 while the certificate is due for renewal and renewing it fails: it will expire unless that changes."}),
		tokenNeeded: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "new_token_needed",
			Help: "1 when only a new one-time token (the provisioner's reconnectRuntimeAgent) can restore the connection."}),
		connectionAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connection_attempts_total",
			Help: "Connections restored, by result: token (a new certificate from the one-time token), resumed (the stored certificate), failed."}, []string{"result"}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "sync_duration_seconds",
			Help: "Duration of a synchronisation with the Director (fetch, apply, label).", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		syncFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "sync_failures_total",
			Help: "Failed synchronisations by the state they ended in."}, []string{"state"}),
		appsApplied: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "applications_applied",
			Help: "Applications the Director assigns to the runtime, as applied by the last synchronisation."}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "resource_writes_total",
			Help: "Writes of Applications and credential Secrets by kind and operation (only what differs is written)."}, []string{"kind", "op"}),
		conditionReports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "director_condition_reports_total",
			Help: "Reports of the runtime's status condition to the Director (CONNECTED, FAILED) by result (ok, failed)."}, []string{"condition", "result"}),
	}
	m.Registry.MustRegister(m.state, m.certNotAfter, m.renewals, m.renewalFailures, m.expiringWithoutRenewal, m.tokenNeeded,
		m.connectionAttempts, m.syncDuration, m.syncFailures, m.appsApplied, m.writes, m.conditionReports,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) setState(s ConnectionState) {
	for _, each := range AllStates {
		v := 0.0
		if each == s {
			v = 1
		}
		m.state.WithLabelValues(string(each)).Set(v)
	}
}

func (m *Metrics) setNotAfter(t time.Time) { m.certNotAfter.Set(float64(t.Unix())) }

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
