package observe

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Unmatched is the route label of a request no route took.
const Unmatched = "unmatched"

// HTTPMetrics are the server's request metrics, labelled by route template (never a path:
// paths carry instance and runtime IDs), method and status code.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTPMetrics registers keb_http_requests_total and keb_http_request_duration_seconds.
func NewHTTPMetrics(reg prometheus.Registerer) (*HTTPMetrics, error) {
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keb_http_requests_total", Help: "HTTP requests served, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "keb_http_request_duration_seconds", Help: "Time to answer an HTTP request, by route template, method and status code.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "code"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type routeKey struct{}

// route is where the router writes the template of the route it matched (SetRoute).
type route struct{ template string }

// SetRoute records the template of the route that serves the request of ctx (the router calls
// it once it matched), for the metrics' label and the span's name.
func SetRoute(ctx context.Context, method, template string) {
	if r, ok := ctx.Value(routeKey{}).(*route); ok {
		r.template = template
	}
	span := trace.SpanFromContext(ctx)
	span.SetName(method + " " + template)
	span.SetAttributes(attribute.String("http.route", template))
}

// Handler serves next with a server span per request (continuing the caller's traceparent)
// and, when m is not nil, its metrics.
func (m *HTTPMetrics) Handler(next http.Handler) http.Handler {
	measured := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rt := &route{template: Unmatched}
		req = req.WithContext(context.WithValue(req.Context(), routeKey{}, rt))
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(rec, req)
		if m == nil {
			return
		}
		method := req.Method
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		default:
			method = "other" // a client chooses the method: keep the label set bounded
		}
		code := strconv.Itoa(rec.status)
		m.requests.WithLabelValues(rt.template, method, code).Inc()
		m.duration.WithLabelValues(rt.template, method, code).Observe(time.Since(start).Seconds())
	})
	return otelhttp.NewHandler(measured, "http", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// statusRecorder remembers the status code an answer was written with.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Flush passes flushes on (the console's event stream and kcp --follow need them).
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Transport is next (http.DefaultTransport when nil) with a client span per request and the
// trace context (traceparent) sent along.
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return otelhttp.NewTransport(next)
}
