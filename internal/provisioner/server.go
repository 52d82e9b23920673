package provisioner

import (
	"net/http"

	"github.com/kyma-project/kyma-environment-broker/internal/observe"
)

// Server is the provisioner's HTTP handler: the GraphQL API (and its playground), and probes
// serving /healthz, /readyz and /metrics. Every request has a server span continuing the caller's
// traceparent and, with metrics, is counted and timed by route template (never a path), method and
// code, like the broker's (keb_http_requests_total, keb_http_request_duration_seconds); a
// request no route takes is counted under route "unmatched".
func (p *Provisioner) Server(probes http.Handler, metrics *observe.HTTPMetrics) http.Handler {
	mux := http.NewServeMux()
	routed := map[string]bool{}
	route := func(pattern string, h http.Handler) {
		if routed[pattern] {
			return
		}
		routed[pattern] = true
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			observe.SetRoute(r.Context(), r.Method, pattern)
			h.ServeHTTP(w, r)
		}))
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		route(path, probes)
	}
	api := p.Handler()
	route(p.cfg.APIEndpoint, api)
	route(p.cfg.PlaygroundAPIEndpoint, api)
	if !routed["/"] {
		mux.Handle("/", api) // answers 404 for any other path, under route "unmatched"
	}
	return metrics.Handler(mux)
}
