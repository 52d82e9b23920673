package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
	"github.com/pivotal-cf/brokerapi/v10"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/sirupsen/logrus"
)

// Middleware wraps a handler (authentication).
type Middleware = func(http.Handler) http.Handler

// APIOptions are how the OSB API is protected and bounded.
type APIOptions struct {
	// V2Auth protects /v2 (basic auth); OAuthAuth protects /oauth/... (JWT, or basic too in
	// the embedded default).
	V2Auth, OAuthAuth Middleware
	// MaxBodyBytes bounds every request body (413 beyond it); DefaultMaxBodyBytes when zero.
	MaxBodyBytes int64
}

// API is the Open Service Broker API, as brokerapi shapes it: brokerapi's handler (with its
// API-version, request-identity and originating-identity middlewares) behind the guard. The
// process's router (internal/app) mounts it next to its other endpoints.
type API struct {
	osb       http.Handler
	lastOp    http.Handler
	v2, oauth Middleware
	maxBody   int64
}

// NewAPI builds the OSB API of b.
func NewAPI(b *Broker, o APIOptions, log logrus.FieldLogger) *API {
	lg := lager.NewLogger("keb")
	lg.RegisterSink(lagerSink{log: log})
	maxBody := o.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	osb := osbGuard(maxBody, newCatalogServer(b).wrap(rejectMalformedBodies(brokerapi.NewWithOptions(b, lg))))
	// Platforms poll last_operation: it is answered before the router, behind the same request
	// log, Retry-After and authentication (its handler makes the guard's checks).
	lastOp := logRequests(log, false, unavailable.WithRetryAfter(o.V2Auth(&lastOperationServer{b: b, lg: lg, log: log})))
	return &API{osb: osb, lastOp: lastOp, v2: o.V2Auth, oauth: o.OAuthAuth, maxBody: maxBody}
}

// MaxBodyBytes is the bound of request bodies the API applies (the router bounds its other
// endpoints alike).
func (a *API) MaxBodyBytes() int64 { return a.maxBody }

// Mount adds the OSB routes to r at /v2, /oauth/v2 and /oauth/{region}/v2 (the region of the
// last one becomes the request's platform region).
func (a *API) Mount(r *mux.Router) {
	r.PathPrefix("/v2/").Handler(a.v2(a.osb))
	r.PathPrefix("/oauth/v2/").Handler(a.oauth(stripPrefix("/oauth", "", a.osb)))
	r.PathPrefix("/oauth/{region}/v2/").Handler(a.oauth(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		region := mux.Vars(req)["region"]
		stripPrefix("/oauth/"+region, region, a.osb).ServeHTTP(w, req)
	})))
}

// AnswerPoll answers GET /v2/service_instances/{id}/last_operation, which platforms poll,
// without the router (lastOperationServer answers as brokerapi would), and reports whether it
// did; every other request is the router's.
func (a *API) AnswerPoll(w http.ResponseWriter, req *http.Request) bool {
	if a.lastOp == nil {
		return false
	}
	if _, ok := lastOperationInstance(req); !ok {
		return false
	}
	a.lastOp.ServeHTTP(w, req)
	return true
}

// LimitBody answers 413 for a declared length over max and makes reading past max fail; it
// reports whether the request may go on (the router applies it to the operator API).
func LimitBody(w http.ResponseWriter, req *http.Request, max int64) bool {
	return limitBody(w, req, max)
}

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
		if _, ok := into.(*domain.ProvisionDetails); ok {
			if err := checkCloudFoundryGUIDs(raw); err != nil {
				writeBadRequest(w, req, err.Error())
				return
			}
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		next.ServeHTTP(w, req)
	})
}

// checkCloudFoundryGUIDs refuses organization_guid and space_guid given as null or "": OSB
// says they MUST be non-empty strings when given (absent is fine; brokerapi's decoding cannot
// tell the three apart).
func checkCloudFoundryGUIDs(raw []byte) error {
	// A map, as a null field would leave a pointer field nil, like an absent one.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return errors.New("malformed JSON body: " + err.Error())
	}
	for _, name := range []string{"organization_guid", "space_guid"} {
		v, given := fields[name]
		if !given {
			continue
		}
		var s *string
		if err := json.Unmarshal(v, &s); err != nil || s == nil || *s == "" {
			return fmt.Errorf("%s: must be a non-empty string when given", name)
		}
	}
	return nil
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

// RequestLog logs every request with its request ID (the platform's
// X-Broker-API-Request-Identity, or a new one, echoed back).
func RequestLog(log logrus.FieldLogger) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler { return logRequests(log, true, next) }
}

// logRequests is RequestLog; withContext also puts the request ID into the request's context
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
		// Platforms poll: building a line nobody writes is a visible share of a last_operation.
		if rec.status < http.StatusInternalServerError && req.Context().Err() == nil && !debugEnabled(log) {
			return
		}
		e := log.WithFields(logrus.Fields{
			"request_id": id, "method": req.Method, "path": req.URL.Path, "status": rec.status,
			"duration_ms": time.Since(start).Milliseconds(),
		})
		if req.Context().Err() != nil {
			// The client went away before the answer: its own timeout, not a failure of ours.
			e.Info("request ended: the client went away before the answer")
			return
		}
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
