package clientkit

import (
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// CallMetrics counts and times the requests the clients send to the external systems, so that an
// outage or a slow system shows on /metrics before operations pile up. Labels are the system, the
// method and the outcome (the status code, or "error" when no answer came): bounded sets.
type CallMetrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	circuit    *prometheus.GaugeVec
	rejections *prometheus.CounterVec
	// log takes the breakers' opening and closing (LogTo); nil discards them.
	log logrus.FieldLogger
}

// LogTo sends the breakers' opening and closing, once each per outage, to log at warn.
func (m *CallMetrics) LogTo(log logrus.FieldLogger) {
	if m != nil {
		m.log = log
	}
}

func (m *CallMetrics) logger() logrus.FieldLogger {
	if m == nil || m.log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		return l
	}
	return m.log
}

// NewCallMetrics registers the metrics with reg.
func NewCallMetrics(reg prometheus.Registerer) (*CallMetrics, error) {
	m := &CallMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "keb", Name: "external_requests_total",
			Help: "Requests sent to external systems, by system, method and outcome (status code, or error when no answer came).",
		}, []string{"system", "method", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "keb", Name: "external_request_duration_seconds",
			Help:    "Duration of a request to an external system until its answer's headers (or the failure).",
			Buckets: []float64{.005, .025, .1, .25, 1, 2.5, 10, 30},
		}, []string{"system"}),
		circuit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "keb", Name: "external_circuit_state",
			Help: "State of a system's circuit breaker: 0 closed, 1 open (calls fail at once), 2 half-open (one probe at a time).",
		}, []string{"system"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "keb", Name: "external_circuit_rejections_total",
			Help: "Calls to a system its open circuit breaker failed at once, without sending a request.",
		}, []string{"system"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.circuit, m.rejections} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *CallMetrics) setState(system string, s BreakerState) {
	if m != nil {
		m.circuit.WithLabelValues(system).Set(float64(s))
	}
}

func (m *CallMetrics) rejected(system string) {
	if m != nil {
		m.rejections.WithLabelValues(system).Inc()
	}
}

// Transport is next (a PooledTransport when nil) observed as system's requests. A nil
// CallMetrics observes nothing.
func (m *CallMetrics) Transport(system string, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = PooledTransport()
	}
	if m == nil {
		return next
	}
	return observed{m: m, system: system, next: next}
}

type observed struct {
	m      *CallMetrics
	system string
	next   http.RoundTripper
}

func (o observed) RoundTrip(req *http.Request) (*http.Response, error) {
	// The client span (NewHTTPClient) is named after the system it calls.
	span := trace.SpanFromContext(req.Context())
	span.SetName(o.system + " " + req.Method)
	span.SetAttributes(attribute.String("keb.system", o.system))
	start := time.Now()
	resp, err := o.next.RoundTrip(req)
	outcome := "error"
	if err == nil {
		outcome = strconv.Itoa(resp.StatusCode)
	}
	o.m.requests.WithLabelValues(o.system, req.Method, outcome).Inc()
	o.m.duration.WithLabelValues(o.system).Observe(time.Since(start).Seconds())
	return resp, err
}

// IdleConnsPerHost is how many idle keep-alive connections a client's transport keeps to one
// system. http.DefaultTransport keeps 2: with the engine's workers calling one system
// concurrently every other request dialed a new connection (and left one in TIME_WAIT); the
// embedded sandbox serves every system from one address, so 2 were shared by all of them.
const IdleConnsPerHost = 64

// ConnsPerHost bounds a client's connections to one system, so its concurrent calls: the
// engine's workers (APP_ENGINE_WORKERS, 384) are many more, since more operations running at
// once make bigger group commits, and a system gets no more than 64 calls at once from a
// replica, as when the workers were 64. A call beyond waits for a connection within its
// attempt's timeout.
const ConnsPerHost = 64

// PooledTransport is a new http.DefaultTransport clone that keeps IdleConnsPerHost idle
// connections per host and opens at most ConnsPerHost: a client's own pool, for callers that
// set TLS or dial options on it.
func PooledTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxConnsPerHost = ConnsPerHost
	tr.MaxIdleConnsPerHost = IdleConnsPerHost
	tr.MaxIdleConns = 4 * IdleConnsPerHost
	return tr
}

// NewHTTPClient is a client's HTTP client: each request (its answer's body included) bounded by
// timeout, sent through transport (http.DefaultTransport when nil), e.g. CallMetrics.Transport,
// and none sent for an engine run whose lease may be over (fenced).
func NewHTTPClient(timeout time.Duration, transport http.RoundTripper) *http.Client {
	if transport == nil {
		transport = http.DefaultTransport
	}
	if timeout > 0 {
		transport = requestTimeout{next: transport, d: timeout}
	}
	// A client span per attempt, and the trace context sent to the system; nothing is sent once
	// the run is fenced.
	return &http.Client{Transport: fenced{next: observe.Transport(transport)}}
}
