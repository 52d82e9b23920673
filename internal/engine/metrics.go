package engine

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// metrics are the engine's Prometheus metrics. Labels are operation types, step names and
// outcomes only: all bounded sets (never IDs).
type metrics struct {
	stepDuration *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	finished     *prometheus.CounterVec
	writes       *prometheus.CounterVec
	events       *prometheus.CounterVec
	handedOver   *prometheus.CounterVec
	parks        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, ops storage.Operations, clock Clock, log logrus.FieldLogger) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "keb", Name: "step_duration_seconds",
			Help:    "Duration of one step run, by operation type, step and outcome.",
			Buckets: []float64{.001, .005, .025, .1, .5, 1, 5, 30, 120},
		}, []string{"type", "step", "outcome"}),
		retries:  counter("step_retries_total", "Step runs that asked to be retried later.", "type", "step"),
		finished: counter("operations_finished_total", "Operations that reached a final state in this process.", "type", "state"),
		writes: counter("engine_writes_total",
			"The engine's durable writes of operations: claims (a worker takes the operation) and saves (progress and events).", "type", "kind"),
		events: counter("engine_events_total", "Events the engine wrote, by operation type.", "type"),
		handedOver: counter("engine_handovers_total",
			"New operations a worker took as they were inserted, leased to it, without a claim.", "type"),
		parks: counter("engine_parks_total",
			"Signalled waits (Signals): parked in memory, run again at once (signalled before), or written.", "type", "outcome"),
	}
	for _, c := range []prometheus.Collector{m.stepDuration, m.retries, m.finished, m.writes, m.events, m.handedOver, m.parks, &dbCollector{ops: ops, clock: clock, log: log}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// counter is one of the engine's counters, keb_<name>.
func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "keb", Name: name, Help: help}, labels)
}

func (m *metrics) stepFinished(opType, step, outcome string, took time.Duration) {
	if m != nil {
		m.stepDuration.WithLabelValues(opType, step, outcome).Observe(took.Seconds())
	}
}

func (m *metrics) retry(opType, step string) {
	if m != nil {
		m.retries.WithLabelValues(opType, step).Inc()
	}
}

// handOver counts a new operation a worker took from its insert.
func (m *metrics) handOver(opType string) {
	if m != nil {
		m.handedOver.WithLabelValues(opType).Inc()
	}
}

// wrote counts a durable write of an operation (kind "claim" or "save") and the events it wrote.
func (m *metrics) wrote(opType, kind string, events int) {
	if m != nil {
		m.writes.WithLabelValues(opType, kind).Inc()
		m.events.WithLabelValues(opType).Add(float64(events))
	}
}

func (m *metrics) operationFinished(opType string, state storage.OperationState) {
	if m != nil {
		m.finished.WithLabelValues(opType, string(state)).Inc()
	}
}

var (
	operationsDesc = prometheus.NewDesc("keb_operations", "Operations in the database by type and state.", []string{"type", "state"}, nil)
	queueDepthDesc = prometheus.NewDesc("keb_queue_depth", "Active operations that are due and not leased.", nil, nil)
	dueLagDesc     = prometheus.NewDesc("keb_due_lag_seconds",
		"How long the active operation that is due and not leased has waited the longest since its due time (0 when none).", nil, nil)
)

// dbCollector reads operation counts and queue depth from the database at scrape time, so
// every replica reports the same truth.
type dbCollector struct {
	ops   storage.Operations
	clock Clock
	log   logrus.FieldLogger
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- operationsDesc
	ch <- queueDepthDesc
	ch <- dueLagDesc
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.ops.CountOperations(ctx)
	if err != nil {
		c.log.WithError(err).Warn("collecting operation counts")
	}
	for _, oc := range counts {
		ch <- prometheus.MustNewConstMetric(operationsDesc, prometheus.GaugeValue, float64(oc.Count), oc.Type, string(oc.State))
	}
	depth, err := c.ops.QueueDepth(ctx, c.clock.Now())
	if err != nil {
		c.log.WithError(err).Warn("collecting queue depth")
		return
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(depth))
	now := c.clock.Now()
	due, found, err := c.ops.OldestDue(ctx, now)
	if err != nil {
		c.log.WithError(err).Warn("collecting due lag")
		return
	}
	lag := 0.0
	if found && now.After(due) {
		lag = now.Sub(due).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(dueLagDesc, prometheus.GaugeValue, lag)
}

func (m *metrics) park(opType string, out parkOutcome) {
	if m != nil {
		m.parks.WithLabelValues(opType, [...]string{parkRefused: "written", parkHeld: "parked", parkSignaled: "signalled_before"}[out]).Inc()
	}
}

// tracerName names the engine's spans' instrumentation scope.
const tracerName = "github.com/kyma-project/kyma-environment-broker/internal/engine"
