package app

import (
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	"github.com/kyma-project/kyma-environment-broker/internal/console"
	"github.com/kyma-project/kyma-environment-broker/internal/httpguard"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
	"github.com/sirupsen/logrus"
)

// Routes are the process's HTTP surface next to the OSB API, and how each part is protected.
type Routes struct {
	// OperatorAuth protects the operator API and the console (the OSB API's own are in
	// broker.APIOptions).
	OperatorAuth broker.Middleware
	Operator     http.Handler
	// Console serves the operator console under /console, behind OperatorAuth: its pages call
	// the operator API above with the same credentials.
	Console http.Handler
	// Health serves /healthz, /readyz and /metrics without authentication.
	Health http.Handler
	// APIDoc serves /openapi.yaml and Swagger UI at / without authentication (last: it takes
	// every path no other route does).
	APIDoc http.Handler
	// Metrics counts and times the requests by route template (nil: none); every request
	// gets a server span either way.
	Metrics *observe.HTTPMetrics

	// RequestTimeout bounds every request routed here (0: none): one still running then is
	// answered 503 with Retry-After, before a client's own timeout (typically 30 s) gives up on
	// it, and its work is cancelled.
	RequestTimeout time.Duration
}

// timeoutBody is the answer to a request that outlived RequestTimeout.
const timeoutBody = `{"description":"the broker did not finish the request in time (APP_HTTP_REQUEST_TIMEOUT); retry later"}`

// withDeadline answers 503 (Retry-After added by unavailable.WithRetryAfter) to a request still
// running after d, and ends its context.
func withDeadline(d time.Duration) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.TimeoutHandler(next, d, timeoutBody)
	}
}

// NewRouter is the process's handler: the OSB API at /v2, /oauth/v2 and /oauth/{region}/v2,
// the operator API, the console, health and the API document, every request logged and every
// 503 with Retry-After. last_operation polls are answered before the router (see
// broker.API.AnswerPoll).
func NewRouter(api *broker.API, rt Routes, log logrus.FieldLogger) *Router {
	r := mux.NewRouter()
	r.Use(routeTemplate, broker.RequestLog(log), unavailable.WithRetryAfter, withDeadline(rt.RequestTimeout))
	api.Mount(r)
	if rt.Operator != nil {
		maxBody := api.MaxBodyBytes()
		op := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if broker.LimitBody(w, req, maxBody) {
				rt.Operator.ServeHTTP(w, req)
			}
		})
		for _, p := range []string{"/runtimes", "/events", "/upgrade/", "/expire/", "/kubeconfig/", "/info/", "/orchestrations"} {
			r.PathPrefix(p).Handler(rt.OperatorAuth(op))
		}
	}
	if rt.Console != nil {
		r.PathPrefix(console.Path).Methods(http.MethodGet, http.MethodHead).Handler(rt.OperatorAuth(rt.Console))
	}
	if rt.Health != nil {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			r.Handle(p, rt.Health)
		}
	}
	if rt.APIDoc != nil {
		r.PathPrefix("/").Handler(rt.APIDoc)
	}
	rr := &Router{mux: r, api: api}
	// The guard answers inside the metrics, so its 400s and 413s are counted too.
	rr.outer = rt.Metrics.Handler(httpguard.Handler(http.HandlerFunc(rr.serve), isOSBPath))
	return rr
}

// isOSBPath reports whether a path is the OSB API's (errors in its {"description"} form).
func isOSBPath(p string) bool {
	return strings.HasPrefix(p, "/v2/") || strings.HasPrefix(p, "/oauth/")
}

// routeTemplate tells observe the template of the route that matched (the metrics' label and
// the span's name: paths carry IDs).
func routeTemplate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if tpl, err := mux.CurrentRoute(req).GetPathTemplate(); err == nil {
			observe.SetRoute(req.Context(), req.Method, osbTemplate(tpl, req.URL.Path))
		}
		next.ServeHTTP(w, req)
	})
}

// osbTemplate completes the template of the OSB API's mounts ("/v2/", "/oauth/{region}/v2/"),
// which hand the rest of the path to brokerapi's router, from the path: IDs become their
// variables, words brokerapi does not serve become {other} (a label set bounded either way).
func osbTemplate(tpl, path string) string {
	if !strings.HasSuffix(tpl, "/v2/") {
		return tpl
	}
	i := strings.Index(path, "/v2/")
	if i < 0 {
		return tpl
	}
	segs := strings.Split(strings.Trim(path[i+len("/v2/"):], "/"), "/")
	for j, seg := range segs {
		switch {
		case j > 0 && segs[j-1] == "service_instances":
			segs[j] = "{instance_id}"
		case j > 0 && segs[j-1] == "service_bindings":
			segs[j] = "{binding_id}"
		case seg == "catalog" || seg == "service_instances" || seg == "service_bindings" || seg == "last_operation" || seg == "":
		default:
			segs[j] = "{other}"
		}
	}
	return tpl + strings.Join(segs, "/")
}

// lastOperationRoute is the route label of the polls answered before the router.
const lastOperationRoute = "/v2/service_instances/{instance_id}/last_operation"

// Router is the process's HTTP handler: gorilla/mux's routes, with last_operation polls
// answered before them.
type Router struct {
	mux *mux.Router
	api *broker.API
	// outer is serve behind httpguard (unparseable queries, ambiguous framing, 413 drain), with a
	// span and metrics per request.
	outer http.Handler
}

func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.outer.ServeHTTP(w, req) }

func (r *Router) serve(w http.ResponseWriter, req *http.Request) {
	if r.api.AnswerPoll(w, req) {
		observe.SetRoute(req.Context(), req.Method, lastOperationRoute)
		return
	}
	r.mux.ServeHTTP(w, req)
}

// Routes are the router's mounts (what the API document must describe).
func (r *Router) Routes() *mux.Router { return r.mux }
