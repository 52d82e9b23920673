package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/kyma-project/kyma-environment-broker/internal/console"
	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/pivotal-cf/brokerapi/v10"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/sirupsen/logrus"
)

// Middleware wraps a handler (authentication).
type Middleware = func(http.Handler) http.Handler

// Routes are the broker's HTTP surface and how each part is protected.
type Routes struct {
	// V2Auth protects /v2 (basic auth); OAuthAuth protects /oauth/... (JWT, or basic too in
	// the embedded default); OperatorAuth protects /runtimes and /events.
	V2Auth, OAuthAuth, OperatorAuth Middleware
	Operator                        http.Handler
	// Console serves the operator console under /console, behind OperatorAuth: its pages call
	// the operator API above with the same credentials.
	Console http.Handler
	// Health serves /healthz, /readyz and /metrics without authentication.
	Health http.Handler
	// APIDoc serves /openapi.yaml and Swagger UI at / without authentication (last: it takes
	// every path no other route does).
	APIDoc http.Handler
	// MaxBodyBytes bounds every request body (413 beyond it); DefaultMaxBodyBytes when zero.
	MaxBodyBytes int64
}

// NewRouter mounts brokerapi's OSB handler (with its API-version, request-identity and
// originating-identity middlewares) at /v2, /oauth/v2 and /oauth/{region}/v2. GET
// /v2/service_instances/{id}/last_operation, which platforms poll, is answered before the
// router by lastOperationServer, as brokerapi would answer it.
func NewRouter(b *Broker, rt Routes, log logrus.FieldLogger) http.Handler {
	return newRouter(b, rt, log, true)
}

// newRouter is NewRouter; without fastLastOperation, last_operation goes through the router and
// brokerapi like every other request (the reference its tests compare with).
func newRouter(b *Broker, rt Routes, log logrus.FieldLogger, fastLastOperation bool) http.Handler {
	lg := lager.NewLogger("keb")
	lg.RegisterSink(lagerSink{log: log})
	maxBody := rt.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	osb := osbGuard(maxBody, newCatalogServer(b).wrap(rejectMalformedBodies(brokerapi.NewWithOptions(b, lg))))
	// Platforms poll last_operation: it is answered before the router, behind the same request
	// log, Retry-After and authentication (its handler makes the guard's checks).
	lastOp := logRequests(log, false, health.WithRetryAfter(rt.V2Auth(&lastOperationServer{b: b, lg: lg, log: log})))

	r := mux.NewRouter()
	r.Use(requestLog(log), health.WithRetryAfter)
	r.PathPrefix("/v2/").Handler(rt.V2Auth(osb))
	r.PathPrefix("/oauth/v2/").Handler(rt.OAuthAuth(stripPrefix("/oauth", "", osb)))
	r.PathPrefix("/oauth/{region}/v2/").Handler(rt.OAuthAuth(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		region := mux.Vars(req)["region"]
		stripPrefix("/oauth/"+region, region, osb).ServeHTTP(w, req)
	})))
	if rt.Operator != nil {
		op := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if limitBody(w, req, maxBody) {
				rt.Operator.ServeHTTP(w, req)
			}
		})
		r.PathPrefix("/runtimes").Handler(rt.OperatorAuth(op))
		r.PathPrefix("/events").Handler(rt.OperatorAuth(op))
		r.PathPrefix("/upgrade/").Handler(rt.OperatorAuth(op))
		r.PathPrefix("/expire/").Handler(rt.OperatorAuth(op))
		r.PathPrefix("/kubeconfig/").Handler(rt.OperatorAuth(op))
		r.PathPrefix("/info/").Handler(rt.OperatorAuth(op))
		r.PathPrefix("/orchestrations").Handler(rt.OperatorAuth(op))
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
	if !fastLastOperation {
		lastOp = nil
	}
	return &Router{mux: r, lastOp: lastOp}
}

// Router is the broker's HTTP handler: gorilla/mux's routes, with last_operation polls answered
// before them.
type Router struct {
	mux    *mux.Router
	lastOp http.Handler
}

func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if _, ok := lastOperationInstance(req); ok && r.lastOp != nil {
		r.lastOp.ServeHTTP(w, req)
		return
	}
	r.mux.ServeHTTP(w, req)
}

// Routes are the router's mounts (what the API document must describe).
func (r *Router) Routes() *mux.Router { return r.mux }

// rejectMalformedBodies answers 400 (OSB: "the request is malformed") for a PUT or PATCH body
// that is not the JSON object of its request, or has anything but white space after it;
// brokerapi would answer 422, which OSB reserves for AsyncRequired, ConcurrencyError and the
// like. It decodes into brokerapi's own types so that exactly the bodies brokerapi cannot read
// are rejected (type errors name the field). A body over the limit is 413.
func rejectMalformedBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPut && req.Method != http.MethodPatch {
			next.ServeHTTP(w, req)
			return
		}
		raw, err := io.ReadAll(req.Body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeDescription(w, req, http.StatusRequestEntityTooLarge, tooLarge(tooBig.Limit))
			return
		}
		if err != nil {
			writeBadRequest(w, req, "reading the request body: "+err.Error())
			return
		}
		var into any = &domain.ProvisionDetails{}
		switch {
		case strings.Contains(req.URL.Path, "/service_bindings/"):
			into = &domain.BindDetails{}
		case req.Method == http.MethodPatch:
			into = &domain.UpdateDetails{}
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(into); err != nil {
			writeBadRequest(w, req, "malformed JSON body: "+err.Error())
			return
		}
		if _, err := dec.Token(); err != io.EOF {
			writeBadRequest(w, req, "malformed JSON body: unexpected data after the JSON object")
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		next.ServeHTTP(w, req)
	})
}

func writeBadRequest(w http.ResponseWriter, req *http.Request, description string) {
	writeDescription(w, req, http.StatusBadRequest, description)
}

// stripPrefix hands brokerapi a /v2/... path and records the platform region.
func stripPrefix(prefix, region string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r2 := req.Clone(WithRegion(req.Context(), region))
		r2.URL.Path = strings.TrimPrefix(req.URL.Path, prefix)
		r2.URL.RawPath = strings.TrimPrefix(req.URL.RawPath, prefix)
		next.ServeHTTP(w, r2)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// requestLog logs every request with its request ID (the platform's
// X-Broker-API-Request-Identity, or a new one, echoed back).
func requestLog(log logrus.FieldLogger) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler { return logRequests(log, true, next) }
}

// logRequests is requestLog; withContext also puts the request ID into the request's context
// (a copy of the request), which handlers that read it from the header do without.
func logRequests(log logrus.FieldLogger, withContext bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("X-Broker-API-Request-Identity")
		if id == "" {
			id = uuid.NewString()
			req.Header.Set("X-Broker-API-Request-Identity", id)
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if withContext {
			req = req.WithContext(withRequestID(req.Context(), id))
		}
		next.ServeHTTP(rec, req)
		// Platforms poll: building a line nobody writes cost ~5% of a last_operation.
		if rec.status < http.StatusInternalServerError && !debugEnabled(log) {
			return
		}
		e := log.WithFields(logrus.Fields{
			"request_id": id, "method": req.Method, "path": req.URL.Path, "status": rec.status,
			"duration_ms": time.Since(start).Milliseconds(),
		})
		// Platforms poll: one line per request belongs to debug; failures of ours stay visible.
		if rec.status >= http.StatusInternalServerError {
			e.Warn("request failed")
			return
		}
		e.Debug("request")
	})
}

// lagerSink sends brokerapi's own log lines to logrus at debug level (errors at warning).
type lagerSink struct{ log logrus.FieldLogger }

func (s lagerSink) Log(f lager.LogFormat) {
	if f.LogLevel < lager.ERROR && !debugEnabled(s.log) {
		return
	}
	e := s.log.WithField("source", f.Source).WithFields(logrus.Fields(f.Data))
	if f.LogLevel >= lager.ERROR {
		e.Warn(f.Message)
		return
	}
	e.Debug(f.Message)
}

// debugEnabled reports whether log writes debug lines (true for loggers it cannot ask). It is
// asked per request: the level may change while the broker runs.
func debugEnabled(log logrus.FieldLogger) bool {
	switch l := log.(type) {
	case *logrus.Logger:
		return l.IsLevelEnabled(logrus.DebugLevel)
	case *logrus.Entry:
		return l.Logger.IsLevelEnabled(logrus.DebugLevel)
	}
	return true
}
